//! Small-to-large: `expand: parent` widens each hit to its parent (its section, cut at
//! paragraphs when over `chunking.parent_max_tokens`), once per parent, read forward from the
//! hit when the budget is short.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{Setup, add_to, id, setup, warning_codes};
use crate::helpers::assert_error;

const SECTIONS: &str = "# Salt\n\n\
    Queen Maren rules the northern isles from a tower of salt. Her fleet guards the cold straits every winter.\n\n\
    # Amber\n\n\
    The river cities of the south trade amber and wool. Their councils elect a speaker every spring.\n\n\
    # Ice\n\n\
    The dragons of the east sleep under the glacier. Miners dig copper in the western hills.";

/// A world beside the setup's, with one sentence per chunk and parents of at most
/// `parent_max_tokens`, holding [`SECTIONS`]; returns it and the source's chunk listing.
async fn sections_world(s: &Setup, parent_max_tokens: u32) -> (Value, Value) {
    let (status, world) = s
        .app
        .post(
            "/v1/worlds",
            json!({"name": format!("Sections {parent_max_tokens}"),
                   "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 0, "parent_max_tokens": parent_max_tokens}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    assert_eq!(world["chunking"]["parent_max_tokens"], parent_max_tokens);
    let accepted = add_to(&s.app, &world, "sections.md", SECTIONS).await;
    s.app.drain().await;
    let (_, chunks) = s
        .app
        .get(&format!(
            "/v1/worlds/{}/sources/{}/chunks",
            id(&world),
            id(&accepted["source"])
        ))
        .await;
    (world, chunks)
}

async fn retrieve(s: &Setup, world: &Value, body: Value) -> Value {
    let (status, answer) = s.app.post(&format!("/v1/worlds/{}/retrieve", id(world)), body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

fn chars(text: &str, start: &Value, end: &Value) -> String {
    let (start, end) = (start.as_u64().unwrap() as usize, end.as_u64().unwrap() as usize);
    text.chars().skip(start).take(end - start).collect()
}

#[tokio::test]
async fn a_hit_brings_its_whole_section_once_with_offsets_for_citing() {
    let s = setup().await;
    let (world, chunks) = sections_world(&s, 40).await;
    let answer = retrieve(
        &s,
        &world,
        json!({"query": "who elects a speaker every spring", "top_k": 1, "expand": "parent"}),
    )
    .await;
    let hit = &answer["results"][0];
    assert!(hit["chunk_text"].as_str().unwrap().contains("speaker"), "{answer}");
    let parents = answer["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 1, "{answer}");
    let parent = &parents[0];
    // The parent is the Amber section, heading to last sentence, and nothing else.
    let text = chars(SECTIONS, &parent["char_start"], &parent["char_end"]);
    assert!(
        text.starts_with("# Amber") && text.ends_with("every spring."),
        "{text:?}"
    );
    assert_eq!(parent["children"], json!([hit["chunk_id"]]));
    assert_eq!(parent["result_indexes"], json!([0]));
    assert_eq!(parent["score"], hit["score"]);
    assert_eq!(parent["source_id"], hit["source_id"]);
    let (first, last) = (
        parent["first_chunk"].as_u64().unwrap() as usize,
        parent["last_chunk"].as_u64().unwrap() as usize,
    );
    let listed = chunks["chunks"].as_array().unwrap();
    let expected: Vec<&Value> = listed[first..=last].iter().map(|c| &c["chunk_text"]).collect();
    assert!(expected.len() >= 2, "the section is more than the hit: {chunks}");
    assert_eq!(answer["context"]["chunks"], json!(expected), "{answer}");
    let tokens: u64 = listed[first..=last]
        .iter()
        .map(|c| c["token_count"].as_u64().unwrap())
        .sum();
    assert_eq!(parent["token_count"], tokens);
    // Every context chunk is cited with its own span and the hit it came with.
    let citations = answer["context"]["citations"].as_array().unwrap();
    assert_eq!(citations.len(), expected.len());
    for (citation, chunk) in citations.iter().zip(&listed[first..=last]) {
        assert_eq!(citation["result_index"], 0);
        assert_eq!(citation["n"], 1);
        assert_eq!(citation["char_start"], chunk["char_start"]);
        assert_eq!(citation["chunk_id"], chunk["id"]);
    }
    assert_eq!(answer["warnings"], json!([]));
    // Without expansion, the hit alone and no parents; the default is the parent.
    let plain = retrieve(
        &s,
        &world,
        json!({"query": "who elects a speaker every spring", "top_k": 1, "expand": "none"}),
    )
    .await;
    assert_eq!(plain["context"]["chunks"], json!([hit["chunk_text"]]));
    assert_eq!(plain["parents"], json!([]));
}

#[tokio::test]
async fn hits_in_one_parent_bring_it_once() {
    let s = setup().await;
    let (world, _) = sections_world(&s, 40).await;
    let answer = retrieve(
        &s,
        &world,
        json!({"query": "river cities trade amber wool councils elect speaker spring", "top_k": 2, "expand": "parent"}),
    )
    .await;
    assert_eq!(answer["results"].as_array().unwrap().len(), 2, "{answer}");
    let parents = answer["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 1, "{answer}");
    assert_eq!(parents[0]["result_indexes"], json!([0, 1]));
    assert_eq!(parents[0]["score"], answer["results"][0]["score"]);
    let text = answer["context"]["text"].as_str().unwrap();
    assert_eq!(text.matches("river cities").count(), 1, "{text}");
    assert!(!text.contains("[2]"), "one passage: {text}");
}

/// A plain-text FAQ: no Markdown, its sections found by their question lines.
const FAQ: &str = "Q1) Where does Queen Maren rule?\n\n\
    Queen Maren rules the northern isles from a tower of salt. Her fleet guards the cold straits every winter. \
    The salt tower has nine floors and a bell.\n\n\
    Q2) What do the river cities trade?\n\n\
    The river cities of the south trade amber and wool. Their councils elect a speaker every spring. \
    The speaker keeps the city seal of the south. The seal is carved from one piece of amber.\n\n\
    Q3) Where do the dragons sleep?\n\n\
    The dragons of the east sleep under the glacier. Miners dig copper in the western hills.";

/// A world with one sentence per chunk and parents of at most `parent_max_tokens` holding
/// [`FAQ`] as plain text; returns it and the texts of its chunks, in order.
async fn faq_world(app: &crate::helpers::TestApp, parent_max_tokens: u32) -> (Value, Vec<String>) {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "FAQ",
                   "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 0, "parent_max_tokens": parent_max_tokens}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let accepted = add_to(app, &world, "faq.txt", FAQ).await;
    app.drain().await;
    let (_, chunks) = app
        .get(&format!(
            "/v1/worlds/{}/sources/{}/chunks",
            id(&world),
            id(&accepted["source"])
        ))
        .await;
    let texts = chunks["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["chunk_text"].as_str().unwrap().to_owned())
        .collect();
    (world, texts)
}

/// The number of the chunk that starts with `start`.
fn numbered(texts: &[String], start: &str) -> usize {
    texts
        .iter()
        .position(|t| t.starts_with(start))
        .unwrap_or_else(|| panic!("no chunk starts with {start}: {texts:?}"))
}

/// Sections of plain text become parents, and a window reads forward from a hit deep in its
/// section: with room for one more chunk, the sentence after the hit, not the one before.
async fn a_window_reads_forward_within_the_hits_section(app: crate::helpers::TestApp) {
    let (world, texts) = faq_world(&app, 1000).await;
    let q2 = numbered(&texts, "Q2)");
    let last = numbered(&texts, "The seal is carved");
    let hit = numbered(&texts, "The speaker keeps");
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "speaker keeps the city seal of the south", "top_k": 1, "expand": "parent",
                   "max_context_tokens": 25}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["results"][0]["chunk_number"], hit, "{answer}");
    // The parent is the question's section, however large the limit.
    let parent = &answer["parents"][0];
    assert_eq!(
        (parent["first_chunk"].as_u64(), parent["last_chunk"].as_u64()),
        (Some(q2 as u64), Some(last as u64)),
        "{answer}"
    );
    let context: Vec<&str> = answer["context"]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(context, [texts[hit].as_str(), texts[last].as_str()], "{answer}");
    assert_eq!(warning_codes(&answer), ["context_truncated"]);

    // A hit near its section's start: the section from its question on, read forward.
    let first = numbered(&texts, "The river cities");
    let (_, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "river cities of the south trade amber and wool", "top_k": 1, "expand": "parent",
                   "max_context_tokens": 35}),
        )
        .await;
    assert_eq!(answer["results"][0]["chunk_number"], first, "{answer}");
    let text = answer["context"]["text"].as_str().unwrap();
    assert!(text.starts_with("[1] Q2) What do the river cities trade?"), "{text}");
    assert!(!text.contains("nine floors"), "never the previous section: {text}");
    // Enough room for the whole section: all of it, and nothing of the sections around it.
    let (_, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "river cities of the south trade amber and wool", "top_k": 1, "expand": "parent",
                   "max_context_tokens": 2000}),
        )
        .await;
    let context = answer["context"]["chunks"].as_array().unwrap();
    assert_eq!(context.len(), last - q2 + 1, "{answer}");
    assert!(warning_codes(&answer).is_empty(), "{answer}");
}

#[tokio::test]
async fn a_window_reads_forward_within_the_hits_section_on_sqlite() {
    let s = setup().await;
    a_window_reads_forward_within_the_hits_section(s.app).await;
}

#[tokio::test]
async fn a_window_reads_forward_within_the_hits_section_on_postgres() {
    let Some(db) = crate::helpers::PgDatabase::create("parents::forward").await else {
        return;
    };
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app =
        crate::helpers::spawn_app_on(db.url.clone(), crate::helpers::on_fake_google(fake.base_url(), |_| {})).await;
    a_window_reads_forward_within_the_hits_section(app).await;
    db.drop_db().await;
}

#[tokio::test]
async fn parent_settings_are_checked() {
    let s = setup().await;
    let (status, error) = s
        .retrieve(json!({"query": "q", "expand": "parent", "neighbors": 1}))
        .await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    assert_eq!(error["error"]["details"]["field"], "expand");
    let (status, error) = s.retrieve(json!({"query": "q", "expand": "parents"})).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    // The default is four chunks' worth.
    assert_eq!(s.world["chunking"]["parent_max_tokens"], 64);
    for bad in [json!(15), json!(1_048_577), json!("64"), json!(-1)] {
        let (status, error) = s
            .app
            .post(
                "/v1/worlds",
                json!({"name": "Bad", "embedding": {"provider": "google", "model": "gemini-embedding-001"},
                       "chunking": {"max_tokens": 16, "parent_max_tokens": bad}}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {error}");
        if bad.is_number() {
            assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_chunking_profile");
            assert_eq!(error["error"]["details"]["field"], "chunking.parent_max_tokens");
        }
    }
    let (_, worlds) = s.app.get("/v1/worlds").await;
    assert_eq!(worlds["worlds"].as_array().unwrap().len(), 1, "nothing was created");
}
