// One user scenario through the TypeScript client (openapi-typescript types for openapi-fetch)
// generated from openapi/openapi.json, untouched: create a world, add a JSON source and upload a
// file, follow the jobs, retrieve, list chunks, read a typed error body, delete. Type-checked
// (strict) and run by scripts/sdk-check:
//
//     node scenario.js BASE_URL TOKEN FILE

import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { randomUUID } from "node:crypto";
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Job = components["schemas"]["Job"];
type Upload = components["schemas"]["AddSourceUpload"];

function check(condition: unknown, message: string): asserts condition {
    if (!condition) {
        console.error(`sdk-check (typescript): ${message}`);
        process.exit(1);
    }
}

async function main(baseUrl: string, token: string, path: string): Promise<void> {
    const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });

    const created = await client.POST("/v1/worlds", {
        body: { name: "TypeScript SDK", embedding: { provider: "local", model: "all-MiniLM-L6-v2" } },
    });
    check(created.data, `create world: ${created.response.status} ${JSON.stringify(created.error)}`);
    const world = created.data.id;

    const added = await client.POST("/v1/worlds/{world_id}/sources", {
        params: { path: { world_id: world } },
        body: {
            filename: "lighthouse.md",
            text: "The lighthouse on Skerry Point was lit in 1831. Its keeper climbs the tower every evening.",
            title: "The lighthouse",
        },
    });
    check(added.data, `add source: ${added.response.status} ${JSON.stringify(added.error)}`);

    const filename = basename(path);
    const uploaded = await client.POST("/v1/worlds/{world_id}/sources/upload", {
        params: { path: { world_id: world } },
        body: { file: readFileSync(path, "utf8") },
        bodySerializer: (body: Upload) => {
            const form = new FormData();
            form.append("file", new Blob([body.file], { type: "text/markdown" }), filename);
            return form;
        },
    });
    check(uploaded.data, `upload: ${uploaded.response.status} ${JSON.stringify(uploaded.error)}`);
    check(uploaded.data.source.filename === filename, `the upload's filename: ${uploaded.data.source.filename}`);

    for (const accepted of [added.data, uploaded.data]) {
        const deadline = Date.now() + 120_000;
        // A new source always has its job (`job` is null only when a write changed nothing).
        const started = accepted.job;
        check(started, `a new source without a job: ${accepted.outcome}`);
        for (;;) {
            const job = await client.GET("/v1/jobs/{job_id}", { params: { path: { job_id: started.id } } });
            check(job.data, `get job: ${job.response.status}`);
            const current: Job = job.data;
            if (current.status === "completed") break;
            check(current.status !== "failed" && current.status !== "cancelled", `job ended ${current.status}`);
            check(Date.now() < deadline, `job ${current.id} still ${current.status} after 120 s`);
            await new Promise((resolve) => setTimeout(resolve, 200));
        }
    }

    const answer = await client.POST("/v1/worlds/{world_id}/retrieve", {
        params: { path: { world_id: world } },
        body: { query: "Who climbs the tower?", top_k: 3 },
    });
    check(answer.data, `retrieve: ${answer.response.status} ${JSON.stringify(answer.error)}`);
    check(answer.data.results.length > 0, "retrieve found nothing");
    check(answer.data.context.text.includes("tower"), `the context misses the answer: ${answer.data.context.text}`);

    const chunks = await client.GET("/v1/worlds/{world_id}/sources/{source_id}/chunks", {
        params: { path: { world_id: world, source_id: uploaded.data.source.id } },
    });
    check(chunks.data, `list chunks: ${chunks.response.status}`);
    check(chunks.data.total > 0 && chunks.data.chunks.length > 0, "the upload has no chunks");

    const missing = await client.GET("/v1/worlds/{world_id}", { params: { path: { world_id: randomUUID() } } });
    check(missing.error, `an unknown world answered ${missing.response.status}`);
    check(missing.error.error.code === "world_not_found", `error code ${missing.error.error.code}`);

    const deleted = await client.DELETE("/v1/worlds/{world_id}", { params: { path: { world_id: world } } });
    check(deleted.response.status === 204, `delete world: ${deleted.response.status}`);
    const gone = await client.GET("/v1/worlds/{world_id}", { params: { path: { world_id: world } } });
    check(gone.response.status === 404, `a deleted world answered ${gone.response.status}`);
    console.log(
        `sdk-check (typescript): ok (${answer.data.results.length} results, ${chunks.data.total} chunks in the upload)`,
    );
}

const [baseUrl, token, path] = process.argv.slice(2);
main(baseUrl, token, path).catch((err: unknown) => {
    console.error("sdk-check (typescript):", err);
    process.exit(1);
});
