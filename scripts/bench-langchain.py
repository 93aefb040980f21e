#!/usr/bin/env python3
"""The LangChain peer of `examples/bench_quality`: how much of each FAQ answer a stock LangChain
`ParentDocumentRetriever` puts into a context of B tokens, on the same local model
(all-MiniLM-L6-v2) and the same corpora as quarry, scored with the same metric.

Usage:
  bench-langchain.py DUMP_DIR MODEL_DIR [--budgets 512,1024,2048] [--k 4] [--limit N]
                     [--per-question FILE] [--threads 2]

DUMP_DIR is what `bench_quality --dump DIR` writes: one folder per corpus holding one text file
per page (the text quarry uploads as one source) and `pairs.tsv` (header, then question,
literal terms, page, start, end, answer begins; the answer is the page's text[start:end], in
code points). Every such folder is a corpus, or DUMP_DIR itself when it holds a pairs.tsv.
MODEL_DIR holds model.onnx and tokenizer.json. Made by scripts/bench-langchain-setup.

The retriever, as LangChain documents it and with nothing tuned:
- every page is one Document (metadata {"page": file name}), added with `add_documents`;
- parent_splitter RecursiveCharacterTextSplitter(chunk_size=2000), child_splitter
  RecursiveCharacterTextSplitter(chunk_size=400) (sizes in chars, default overlap 200);
- vectorstore InMemoryVectorStore (cosine similarity, exhaustive), docstore InMemoryStore;
- similarity search for the k child chunks nearest the question (k=4 unless --k), whose parent
  chunks are returned once each, in the rank of their best child.
The embeddings: model.onnx through ONNX Runtime (CPU, --threads intra-op threads), the output
`sentence_embedding`, L2-normalised; tokenizer.json with [CLS]/[SEP], truncated to 256 tokens
as sentence-transformers does for this model (its max_seq_length); batches of 32.

The context at budget B: the returned parents' texts in rank order, joined with "\n\n", cut to
at most B tokens. Tokens are counted with tokenizer.json, with no special tokens, no truncation
and no padding (len of `encode(text, add_special_tokens=False).ids`), on the whole context
string. Parents are kept whole while the context with them fits; the first that does not is cut
at the last whitespace boundary whose prefix fits (a cut point is the start of a whitespace run
in that parent, the prefix ends just before it, so the kept text is the context so far + "\n\n"
+ prefix; none if no prefix fits) and nothing after it is added.

The metric, word 4-gram coverage of the answer in the context (quarry's Rust side computes the
same):
- words of a text: its maximal runs of chars c with c.isalnum() (Python's: Unicode letters and
  numbers), each run lowercased with str.lower() after it is cut out;
- n = min(4, number of answer words); a pair whose answer has no word is skipped (not counted);
- A = the set of distinct n-grams (n consecutive words) of the answer, C = the set of n-grams of
  the context, same n; share = |A ∩ C| / |A| (an empty context has share 0);
- per corpus and budget: "share" = the mean share over the questions, "fully" = the fraction of
  the questions whose share is ≥ 0.8.

Output: one JSON line per corpus on stdout,
  {"corpus", "questions", "k", "seconds", "index_seconds", "query_seconds",
   "budgets": {"512": {"fully", "share"}, ...}}
where index_seconds is add_documents (splitting and embedding every chunk), query_seconds is the
questions (retrieval and cutting the contexts; scoring excluded) and seconds their sum; model
loading is not timed. With --per-question FILE, a TSV of corpus, question, literal terms and the
share at each budget. --limit N asks at most N questions per corpus, those at i * n // N for
i < N in pairs.tsv order, as bench_quality's --limit picks them. Progress goes to stderr.
Nothing is fetched: the model is read from MODEL_DIR and LangSmith tracing is turned off.
"""

import argparse
import json
import os
import re
import sys
import time

# Tracing would send every run to LangSmith; the benchmark runs offline.
for _var in ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_TRACING_V2"):
    os.environ[_var] = "false"

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

try:  # its home since LangChain 1.0
    from langchain_classic.retrievers import ParentDocumentRetriever
except ImportError:  # langchain 0.3
    from langchain.retrievers import ParentDocumentRetriever

MAX_SEQ_LENGTH = 256
BATCH = 32
FULLY = 0.8
# One or more chars that are alphanumeric by str.isalnum(): Python's \w is exactly isalnum or "_".
WORD = re.compile(r"[^\W_]+")


def log(message):
    print(message, file=sys.stderr, flush=True)


class OnnxEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 from model.onnx and tokenizer.json, as a LangChain Embeddings."""

    def __init__(self, model_dir, threads):
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest of a batch
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            os.path.join(model_dir, "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.texts_embedded = 0

    def _embed(self, texts):
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        vectors = self.session.run(["sentence_embedding"], feeds)[0].astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.texts_embedded += len(texts)
        return vectors / np.maximum(norms, 1e-12)

    def embed_documents(self, texts):
        out = []
        for i in range(0, len(texts), BATCH):
            out.extend(self._embed(texts[i : i + BATCH]).tolist())
        return out

    def embed_query(self, text):
        return self._embed([text])[0].tolist()


class TokenCounter:
    """Tokens of a text by tokenizer.json: no special tokens, no truncation, no padding."""

    def __init__(self, model_dir):
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def __call__(self, text):
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


def cut_points(text):
    """The starts of the whitespace runs of text (after its first char), in order."""
    return [i for i in range(1, len(text)) if text[i].isspace() and not text[i - 1].isspace()]


def context_for(parents, budget, count):
    """The parents joined with "\\n\\n", cut to at most budget tokens (see the docstring)."""
    context = ""
    for parent in parents:
        joined = context + "\n\n" if context else ""
        if count(joined + parent) <= budget:
            context = joined + parent
            continue
        # The last cut point whose prefix fits: the count grows with the prefix, so bisect.
        points = cut_points(parent)
        lo, hi = 0, len(points)  # points[:lo] fit, points[hi:] do not
        while lo < hi:
            mid = (lo + hi) // 2
            if count(joined + parent[: points[mid]]) <= budget:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0:
            context = joined + parent[: points[lo - 1]]
        break
    return context


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def ngrams(ws, n):
    return {tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)}


def share(answer_words, context):
    """The share of the answer's distinct n-grams (n = min(4, its words)) found in the context."""
    n = min(4, len(answer_words))
    wanted = ngrams(answer_words, n)
    found = ngrams(words(context), n)
    return len(wanted & found) / len(wanted)


def read_text(path):
    # Bytes decoded as they are: no newline translation, so char offsets stay quarry's.
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def load_corpus(folder):
    """The pages (name -> text) and the pairs of a dump folder, in pairs.tsv order."""
    pages = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name != "pairs.tsv" and not name.startswith(".") and os.path.isfile(path):
            pages[name] = read_text(path)
    lines = read_text(os.path.join(folder, "pairs.tsv")).split("\n")
    header = lines[0].rstrip("\r").split("\t")
    column = {name: i for i, name in enumerate(header)}
    for needed in ("question", "page", "start", "end"):
        if needed not in column:
            raise SystemExit(f"{folder}/pairs.tsv: no column `{needed}`")
    pairs = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        page = fields[column["page"]]
        if page not in pages:
            raise SystemExit(f"{folder}/pairs.tsv:{number}: no page `{page}`")
        start, end = int(fields[column["start"]]), int(fields[column["end"]])
        pairs.append(
            {
                "question": fields[column["question"]],
                "literal": fields[column["literal terms"]] if "literal terms" in column else "",
                "answer": pages[page][start:end],
            }
        )
    return pages, pairs


def corpora(dump_dir):
    if os.path.isfile(os.path.join(dump_dir, "pairs.tsv")):
        return [(os.path.basename(os.path.normpath(dump_dir)), dump_dir)]
    found = []
    for name in sorted(os.listdir(dump_dir)):
        folder = os.path.join(dump_dir, name)
        if os.path.isfile(os.path.join(folder, "pairs.tsv")):
            found.append((name, folder))
    return found


def run_corpus(name, folder, embeddings, count, args, per_question):
    pages, pairs = load_corpus(folder)
    if args.limit is not None and args.limit < len(pairs):
        n = len(pairs)
        pairs = [pairs[i * n // args.limit] for i in range(args.limit)]
    asked = []
    for pair in pairs:
        answer_words = words(pair["answer"])
        if answer_words:
            asked.append((pair, answer_words))
        else:
            log(f"{name}: skipped, no word in its answer: {pair['question']}")
    log(f"{name}: {len(pages)} pages, {len(asked)} questions")

    started = time.perf_counter()
    retriever = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(embeddings),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
        parent_splitter=RecursiveCharacterTextSplitter(chunk_size=2000),
        **({"search_kwargs": {"k": args.k}} if args.k != 4 else {}),
    )
    embeddings.texts_embedded = 0
    retriever.add_documents([Document(page_content=text, metadata={"page": page}) for page, text in pages.items()])
    index_seconds = time.perf_counter() - started
    log(f"{name}: indexed {embeddings.texts_embedded} child chunks in {index_seconds:.1f} s")

    query_seconds = 0.0
    sums = {b: 0.0 for b in args.budgets}
    fully = {b: 0 for b in args.budgets}
    for number, (pair, answer_words) in enumerate(asked, start=1):
        started = time.perf_counter()
        parents = [d.page_content for d in retriever.invoke(pair["question"])]
        contexts = {b: context_for(parents, b, count) for b in args.budgets}
        query_seconds += time.perf_counter() - started
        shares = {b: share(answer_words, contexts[b]) for b in args.budgets}
        for b, s in shares.items():
            sums[b] += s
            fully[b] += s >= FULLY
        if per_question is not None:
            row = [name, pair["question"], pair["literal"]] + [f"{shares[b]:.4f}" for b in args.budgets]
            per_question.write("\t".join(row) + "\n")
        if number % 50 == 0 or number == len(asked):
            log(f"{name}: {number}/{len(asked)} questions, {query_seconds:.1f} s")

    questions = len(asked)
    return {
        "corpus": name,
        "questions": questions,
        "k": args.k,
        "seconds": round(index_seconds + query_seconds, 3),
        "index_seconds": round(index_seconds, 3),
        "query_seconds": round(query_seconds, 3),
        "budgets": {
            str(b): {
                "fully": round(fully[b] / questions, 4) if questions else 0.0,
                "share": round(sums[b] / questions, 4) if questions else 0.0,
            }
            for b in args.budgets
        },
    }


def main():
    parser = argparse.ArgumentParser(description="LangChain ParentDocumentRetriever peer of bench_quality")
    parser.add_argument("dump_dir")
    parser.add_argument("model_dir")
    parser.add_argument("--budgets", default="512,1024,2048", help="context budgets in tokens, comma-separated")
    parser.add_argument("--k", type=int, default=4, help="child chunks searched (LangChain's default 4)")
    parser.add_argument("--limit", type=int, help="at most N questions per corpus, spread evenly")
    parser.add_argument("--per-question", metavar="FILE", help="write each question's shares as TSV")
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    args = parser.parse_args()
    args.budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    if args.k < 1 or (args.limit is not None and args.limit < 1) or not args.budgets or min(args.budgets) < 1:
        parser.error("--k, --limit and the budgets must be positive")

    found = corpora(args.dump_dir)
    if not found:
        raise SystemExit(f"{args.dump_dir}: no pairs.tsv in it nor in a folder of it")
    embeddings = OnnxEmbeddings(args.model_dir, args.threads)
    count = TokenCounter(args.model_dir)
    per_question = None
    if args.per_question:
        per_question = open(args.per_question, "w", encoding="utf-8", newline="")
        per_question.write("\t".join(["corpus", "question", "literal terms"] + [f"share@{b}" for b in args.budgets]) + "\n")
    try:
        for name, folder in found:
            print(json.dumps(run_corpus(name, folder, embeddings, count, args, per_question)), flush=True)
    finally:
        if per_question is not None:
            per_question.close()


if __name__ == "__main__":
    main()
