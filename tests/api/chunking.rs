//! The chunker's contract (API.md, "Sources (books) and chunks"): properties over generated
//! text mixing ASCII sentences, multi-byte chars, long unbroken words, line breaks and markdown,
//! and examples of behaviour a user would notice.

use proptest::prelude::*;
use std::sync::OnceLock;

use quarry::chunking::{ChunkError, count_tokens, prepare_text, split, split_with};

/// [`prepare_text`] without a size limit, never stopped.
fn prepare(content_type: &str, raw: &str) -> Result<String, ChunkError> {
    prepare_text(content_type, raw.to_owned(), usize::MAX, &|| false)
}
use quarry::domain::{ChunkingProfile, NewChunk};
use quarry::providers::local::WordPieceCounter;

/// An independent count: straight from tiktoken, not through quarry.
fn cl100k(text: &str) -> usize {
    tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len()
}

fn profile(max_tokens: u32, overlap_tokens: u32) -> ChunkingProfile {
    ChunkingProfile {
        max_tokens,
        overlap_tokens,
        parent_max_tokens: ChunkingProfile::default_parent_max_tokens(max_tokens),
        context_prefix: false,
    }
}

fn chars_of(text: &str, start: u64, end: u64) -> String {
    let start = usize::try_from(start).unwrap_or(usize::MAX);
    let end = usize::try_from(end).unwrap_or(usize::MAX);
    text.chars().skip(start).take(end.saturating_sub(start)).collect()
}

// ---------------------------------------------------------------------------------------------
// Generators

const WORDS: &[&str] = &[
    "the",
    "river",
    "Aerth",
    "kingdom",
    "slowly",
    "north",
    "was",
    "of",
    "and",
    "dragon's",
    "fire",
    "1204",
    "O'Neil",
    "well-known",
    "café",
    "über",
    "naïve",
    "Ærøskøbing",
    "東京",
    "日本語",
    "の",
    "😀",
    "👩‍👩‍👧",
    "𝔘𝔫𝔦",
    "«quoted»",
];

/// One sentence of words with an end mark and trailing space.
fn sentence() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(WORDS), 1..14),
        prop::sample::select(&[". ", "? ", "! ", "。", "… "]),
    )
        .prop_map(|(words, end)| {
            let mut s = words.join(" ");
            if let Some(first) = s.get(..1) {
                s.replace_range(..1, &first.to_uppercase());
            }
            s + end
        })
}

/// A piece of text; pieces are concatenated as they are.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => sentence(),
        // Long words with no spaces: ASCII, accents, CJK, emoji.
        2 => "[a-z]{40,400}",
        1 => "[éüß東京語😀🎉]{20,200}",
        1 => "[a-zé東😀]{10,60}",
        2 => prop::sample::select(&["\n", "\n\n", "\r\n", "\n\n\n\n", "   ", "\t", " \n \n "]).prop_map(str::to_owned),
        2 => (1usize..=6, sentence()).prop_map(|(level, title)| format!("\n{} {}\n", "#".repeat(level), title.trim())),
        1 => sentence().prop_map(|s| format!("\n- {}\n", s.trim())),
        1 => sentence().prop_map(|s| format!("\n```\n# {}\n```\n", s.trim())),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..48).prop_map(|pieces| pieces.concat())
}

/// Random profiles: max_tokens in `range`, overlap up to half of it.
fn profiles_in(range: std::ops::RangeInclusive<u32>) -> impl Strategy<Value = ChunkingProfile> {
    range
        .prop_flat_map(|max| (Just(max), 0..=max / 2))
        .prop_map(|(max, overlap)| profile(max, overlap))
}

fn profiles() -> impl Strategy<Value = ChunkingProfile> {
    profiles_in(16..=512)
}

/// Mostly profiles small enough that generated texts need several chunks.
fn small_profiles() -> impl Strategy<Value = ChunkingProfile> {
    prop_oneof![2 => profiles_in(16..=64), 1 => profiles()]
}

/// 64 cases per property, or `PROPTEST_CASES` for a deeper run.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
        ..ProptestConfig::default()
    }
}

/// Every invariant of the contract for `chunks` of `text`, with `count` the tokenizer's own
/// count: numbered in order, disjoint, each its char slice, trimmed, exactly counted and within
/// `max_tokens`, overlaps ending at the chunk within `overlap_tokens`, and every non-whitespace
/// char in some chunk.
fn check_contract(
    text: &str,
    profile: ChunkingProfile,
    chunks: &[NewChunk],
    count: fn(&str) -> usize,
) -> Result<(), TestCaseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut covered = vec![false; chars.len()];
    let mut previous_end = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        prop_assert_eq!(chunk.chunk_number as usize, i);
        prop_assert!(chunk.char_start >= previous_end);
        prop_assert_eq!(&chars_of(text, chunk.char_start, chunk.char_end), &chunk.chunk_text);
        prop_assert!(chunk.chunk_text.chars().next().is_some_and(|c| !c.is_whitespace()));
        prop_assert!(chunk.chunk_text.chars().next_back().is_some_and(|c| !c.is_whitespace()));
        prop_assert_eq!(chunk.token_count as usize, count(&chunk.chunk_text), "{:?}", chunk);
        prop_assert!(
            chunk.token_count <= profile.max_tokens,
            "{chunk:?} over {}",
            profile.max_tokens
        );
        let overlap_chars = chunk.overlap_text.chars().count() as u64;
        prop_assert!(overlap_chars <= chunk.char_start);
        prop_assert_eq!(
            &chars_of(text, chunk.char_start - overlap_chars, chunk.char_start),
            &chunk.overlap_text
        );
        prop_assert!(count(&chunk.overlap_text) <= profile.overlap_tokens as usize);
        for slot in &mut covered[chunk.char_start as usize..chunk.char_end as usize] {
            prop_assert!(!*slot, "chunks overlap");
            *slot = true;
        }
        previous_end = chunk.char_end;
    }
    for (c, covered) in chars.iter().zip(&covered) {
        prop_assert!(*covered || c.is_whitespace(), "{c:?} is in no chunk");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(config())]

    #[test]
    fn offsets_reproduce_chunk_text(text in text(), profile in small_profiles()) {
        for chunk in split(&text, profile) {
            prop_assert!(chunk.char_start < chunk.char_end, "empty chunk {chunk:?}");
            prop_assert_eq!(chars_of(&text, chunk.char_start, chunk.char_end), chunk.chunk_text);
        }
    }

    #[test]
    fn chunks_are_numbered_ordered_and_disjoint(text in text(), profile in small_profiles()) {
        let chunks = split(&text, profile);
        for (i, chunk) in chunks.iter().enumerate() {
            prop_assert_eq!(chunk.chunk_number as usize, i);
        }
        for pair in chunks.windows(2) {
            prop_assert!(pair[0].char_end <= pair[1].char_start, "overlapping {:?} / {:?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn chunks_cover_every_non_whitespace_char_and_are_trimmed(text in text(), profile in small_profiles()) {
        let chars: Vec<char> = text.chars().collect();
        let mut covered = vec![false; chars.len()];
        for chunk in split(&text, profile) {
            let first = chunk.chunk_text.chars().next();
            let last = chunk.chunk_text.chars().next_back();
            prop_assert!(first.is_some_and(|c| !c.is_whitespace()), "starts with whitespace: {chunk:?}");
            prop_assert!(last.is_some_and(|c| !c.is_whitespace()), "ends with whitespace: {chunk:?}");
            for slot in &mut covered[chunk.char_start as usize..chunk.char_end as usize] {
                *slot = true;
            }
        }
        for (i, (c, covered)) in chars.iter().zip(&covered).enumerate() {
            prop_assert!(*covered || c.is_whitespace(), "char {i} {c:?} is in no chunk");
        }
    }

    #[test]
    fn token_counts_are_exact_and_within_max(text in text(), profile in small_profiles()) {
        for chunk in split(&text, profile) {
            prop_assert_eq!(chunk.token_count as usize, cl100k(&chunk.chunk_text), "{:?}", chunk);
            prop_assert!(chunk.token_count <= profile.max_tokens, "{chunk:?} over {}", profile.max_tokens);
            prop_assert_eq!(count_tokens(&chunk.chunk_text), chunk.token_count);
        }
    }

    #[test]
    fn split_is_deterministic(text in text(), profile in profiles()) {
        prop_assert_eq!(split(&text, profile), split(&text, profile));
    }

    #[test]
    fn overlap_ends_at_char_start_within_budget(text in text(), profile in small_profiles()) {
        let chunks = split(&text, profile);
        let mut previous: Option<&NewChunk> = None;
        for chunk in &chunks {
            let overlap = &chunk.overlap_text;
            let len = overlap.chars().count() as u64;
            match previous {
                None => prop_assert_eq!(overlap, "", "chunk 0 carries no overlap"),
                Some(previous) => {
                    prop_assert!(len <= chunk.char_start);
                    // Carried in from the previous chunk: it starts inside it, not before.
                    prop_assert!(chunk.char_start - len >= previous.char_start, "{chunk:?} after {previous:?}");
                    prop_assert_eq!(&chars_of(&text, chunk.char_start - len, chunk.char_start), overlap);
                    prop_assert!(cl100k(overlap) <= profile.overlap_tokens as usize, "{overlap:?}");
                    prop_assert!(overlap.chars().next().is_none_or(|c| !c.is_whitespace()), "{overlap:?}");
                }
            }
            if profile.overlap_tokens == 0 {
                prop_assert_eq!(overlap, "");
            }
            previous = Some(chunk);
        }
    }

    /// Every invariant at once, over a soup of the characters that stress the splitter most:
    /// terminators, markdown markers, CR/LF, combining marks, ZWJ emoji parts, CJK.
    #[test]
    fn the_contract_holds_on_character_soup(
        text in "[a-zA-Z0-9 .!?#\\-*\r\n\t\u{301}\u{200d}👩👧東。»()\"]{0,1500}",
        profile in profiles_in(16..=48),
    ) {
        let chunks = split(&text, profile);
        prop_assert_eq!(&chunks, &split(&text, profile));
        check_contract(&text, profile, &chunks, cl100k)?;
    }

    #[test]
    fn whitespace_only_text_has_no_chunks(text in "[ \t\r\n\u{a0}\u{3000}]{0,64}", profile in profiles()) {
        prop_assert!(split(&text, profile).is_empty());
        prop_assert_eq!(prepare("text/plain", &text), Err(ChunkError::Empty));
    }

    #[test]
    fn html_text_is_tidy(body in prop::collection::vec(prop_oneof![
        text(),
        prop::sample::select(&["<p>", "</p>", "<br>", "<div>", "</div>", "<li>", "<h2>", "</h2>", "<pre>", "</pre>",
            "<script>x<y</script>", "<b>", "&amp;", "&nbsp;", "<", "&#x1F600;"]).prop_map(str::to_owned),
    ], 0..24)) {
        let html = body.concat();
        match prepare("text/html", &html) {
            Ok(text) => {
                prop_assert!(!text.contains("\n\n\n"), "{text:?}");
                // Trimmed, except the indentation of a leading <pre> line.
                prop_assert_eq!(text.trim_end(), text.as_str());
                prop_assert!(!text.starts_with(['\n', '\r']), "{text:?}");
                prop_assert!(!text.contains("x<y"), "script kept: {text:?}");
            }
            Err(error) => prop_assert_eq!(error, ChunkError::Empty),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Examples

#[test]
fn three_sentences_with_a_large_budget_are_one_chunk() {
    let text = "The ferry left at dawn. Nobody waved from the pier! Was anyone watching?";
    let chunks = split(text, profile(512, 64));
    assert_eq!(chunks.len(), 1);
    let chunk = &chunks[0];
    assert_eq!(
        (chunk.chunk_number, chunk.char_start, chunk.char_end),
        (0, 0, text.chars().count() as u64)
    );
    assert_eq!(chunk.chunk_text, text);
    assert_eq!(chunk.token_count as usize, cl100k(text));
    assert_eq!(chunk.overlap_text, "");
}

#[test]
fn sentences_are_packed_whole() {
    let text = (1..=30)
        .map(|i| format!("Sentence number {i} sits here."))
        .collect::<Vec<_>>()
        .join(" ");
    let chunks = split(&text, profile(40, 0));
    assert!(chunks.len() > 3);
    for chunk in &chunks {
        assert!(chunk.chunk_text.starts_with("Sentence number "), "{chunk:?}");
        assert!(chunk.chunk_text.ends_with("sits here."), "{chunk:?}");
    }
}

#[test]
fn a_long_sentence_is_windowed_at_word_boundaries() {
    let text = format!("wander through the quiet valley{} end.", " and onward".repeat(200));
    let chunks = split(&text, profile(32, 8));
    assert!(chunks.len() > 10, "{} chunks", chunks.len());
    for chunk in &chunks {
        assert!(chunk.token_count <= 32);
        // Cut at whitespace: every window holds whole words.
        for word in chunk.chunk_text.split_whitespace() {
            assert!(
                ["wander", "through", "the", "quiet", "valley", "and", "onward", "end."].contains(&word),
                "{word:?}"
            );
        }
    }
}

#[test]
fn a_long_word_is_windowed_without_cutting_chars() {
    let text = "東京😀ü".repeat(400);
    let chunks = split(&text, profile(20, 5));
    assert!(chunks.len() > 20);
    let rebuilt: String = chunks.iter().map(|c| c.chunk_text.as_str()).collect();
    assert_eq!(rebuilt, text, "windows of an unbroken word are adjacent and complete");
    for pair in chunks.windows(2) {
        assert_eq!(pair[0].char_end, pair[1].char_start);
        assert!(pair[1].token_count <= 20);
    }
}

#[test]
fn markdown_headings_start_new_chunks() {
    let text = "# Book One\n\n## The Road\n\nThey walked all day. The road was long.\n\n\
                ## The Inn\n\nAt dusk they found an inn. It was full.\n\n- a list item\n- another one\n";
    let chunks = split(text, profile(256, 0));
    let texts: Vec<&str> = chunks.iter().map(|c| c.chunk_text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "# Book One\n\n## The Road\n\nThey walked all day. The road was long.",
            "## The Inn\n\nAt dusk they found an inn. It was full.\n\n- a list item\n- another one",
        ]
    );
}

#[test]
fn overlap_starts_at_a_sentence_boundary() {
    let text = (1..=40)
        .map(|i| format!("Line {i} is short."))
        .collect::<Vec<_>>()
        .join(" ");
    let chunks = split(&text, profile(48, 16));
    assert!(chunks.len() > 3);
    for chunk in &chunks[1..] {
        let overlap = &chunk.overlap_text;
        assert!(overlap.starts_with("Line "), "{overlap:?}");
        assert!(
            overlap.ends_with(". "),
            "ends right where the chunk starts: {overlap:?}"
        );
        assert!(cl100k(overlap) <= 16);
        // About the budget: more than one sentence's worth when two fit.
        assert!(cl100k(overlap) > 8, "{overlap:?}");
    }
}

#[test]
fn overlap_falls_back_to_a_word_boundary() {
    let long = "this sentence keeps going far beyond any small overlap budget without a single stop";
    let text = format!("{long}. {long}. {long}.");
    let chunks = split(&text, profile(20, 6));
    assert!(chunks.len() > 1);
    for chunk in &chunks[1..] {
        let overlap = &chunk.overlap_text;
        assert!(!overlap.is_empty() && cl100k(overlap) <= 6, "{overlap:?}");
        assert!(
            long.contains(overlap.trim_end().trim_end_matches('.')),
            "{overlap:?} is whole words of the text"
        );
        assert!(overlap.chars().next().is_some_and(char::is_alphabetic), "{overlap:?}");
    }
}

#[test]
fn html_script_and_style_are_stripped_and_entities_decoded() {
    let html = "<!doctype html><html><head><title>Ignored</title><style>body { color: red }</style>\
                <script>var a = '<p>not text</p>';</script></head><body>\
                <h1>Caf&eacute; &amp; Bar</h1><p>Fish&nbsp;&lt;3 chips &#x1F41F;</p>\
                <ul><li>one</li><li>two</li></ul><p>a<br>b</p></body></html>";
    let text = prepare("text/html; charset=utf-8", html).expect("html converts");
    assert_eq!(text, "# Café & Bar\n\nFish <3 chips 🐟\n\n- one\n- two\n\na\nb");
}

#[test]
fn plain_text_and_markdown_are_stored_unchanged() {
    let raw = "  Title\r\n\r\n\r\n\r\nBody &amp; <b>tags</b> stay.  \n";
    for content_type in [
        "text/plain",
        "text/markdown",
        "Text/Markdown; charset=UTF-8",
        "text/plain;charset=utf-8",
    ] {
        assert_eq!(prepare(content_type, raw).as_deref(), Ok(raw), "{content_type}");
    }
}

#[test]
fn unknown_content_types_are_rejected_by_name() {
    for content_type in ["application/pdf", "image/png", "", "text/csv", "texthtml"] {
        let error = prepare(content_type, "some text").expect_err(content_type);
        assert_eq!(error, ChunkError::UnsupportedContentType(content_type.to_owned()));
        assert!(error.to_string().contains(content_type));
    }
}

#[test]
fn whitespace_only_sources_are_empty() {
    assert_eq!(prepare("text/plain", " \n\t\r\n "), Err(ChunkError::Empty));
    assert_eq!(prepare("text/markdown", ""), Err(ChunkError::Empty));
    assert_eq!(
        prepare(
            "text/html",
            "<html><head><title>t</title></head><body> <p>&nbsp;</p><script>x</script></body>"
        ),
        Err(ChunkError::Empty)
    );
    assert!(split("", profile(512, 64)).is_empty());
    assert!(split(" \n\n\t ", profile(512, 64)).is_empty());
}

#[test]
fn count_tokens_is_cl100k() {
    assert_eq!(count_tokens(""), 0);
    assert_eq!(count_tokens("hello world"), 2);
    assert_eq!(count_tokens("<|endoftext|>") as usize, cl100k("<|endoftext|>"));
}

// ---------------------------------------------------------------------------------------------
// The same contract in the local model's WordPiece tokens (when its files are present)

/// quarry's counter for the local model, or `None` after the skip notice.
fn word_pieces() -> Option<&'static WordPieceCounter> {
    static COUNTER: OnceLock<Option<WordPieceCounter>> = OnceLock::new();
    COUNTER
        .get_or_init(|| {
            crate::local_model::model_present("chunking::the_contract_holds_in_word_pieces")
                .then(|| WordPieceCounter::from_dir(&crate::local_model::model_dir()).unwrap())
        })
        .as_ref()
}

/// An independent count: the model's tokenizer.json straight through the tokenizers crate.
fn word_piece_count(text: &str) -> usize {
    static TOKENIZER: OnceLock<tokenizers::Tokenizer> = OnceLock::new();
    let tokenizer = TOKENIZER.get_or_init(|| {
        let path = crate::local_model::model_dir().join("tokenizer.json");
        let mut tokenizer = tokenizers::Tokenizer::from_file(path).unwrap();
        tokenizer.with_truncation(None).unwrap();
        tokenizer.with_padding(None);
        tokenizer
    });
    tokenizer.encode(text, false).unwrap().len()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_contract_holds_in_word_pieces(text in text(), profile in small_profiles()) {
        let Some(counter) = word_pieces() else { return Ok(()) };
        let chunks = split_with(&text, profile, counter);
        check_contract(&text, profile, &chunks, word_piece_count)?;
    }
}

#[test]
fn a_profile_larger_than_the_local_model_takes_still_gets_chunks_it_takes() {
    let Some(counter) = word_pieces() else { return };
    // A local world stored with max_tokens 300 (older versions allowed up to 256).
    let text = "Queen Maren rules the northern isles from a tower of salt. ".repeat(60);
    let chunks = split_with(&text, profile(300, 0), counter);
    assert!(chunks.len() > 1);
    for chunk in &chunks {
        assert!(chunk.token_count <= 254, "{chunk:?}");
        assert_eq!(word_piece_count(&chunk.chunk_text), chunk.token_count as usize);
    }
    assert!(chunks[0].token_count > 240, "filled up to the limit: {:?}", chunks[0]);
}
