//! Sources' title, URL and metadata: written with the source, read back wherever a source is,
//! read for retrieval's hits by id, and, for a source stored before they existed (migration
//! 0005), read back as none.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{JobId, Metadata, NewSource, SourceDetails, SourceId, WorldId};
use quarry::store::Store;
use serde_json::json;

use super::{add_source, chunks, new_world};

fn details() -> SourceDetails {
    let metadata = json!({"lang": "en", "quote": "say \"hi\"\n", "ice": "北の氷河 🐉", "empty": ""});
    SourceDetails {
        title: Some("The Isles — «chapter 1»".into()),
        url: Some("https://example.com/isles?ch=1#top".into()),
        metadata: Metadata::parse(&metadata, "metadata").unwrap(),
    }
}

async fn add_with_details(store: &Arc<dyn Store>, world: WorldId, details: SourceDetails) -> quarry::domain::Source {
    let run = store.get_world(world).await.unwrap().unwrap().active_run;
    let source = NewSource {
        key: None,
        id: SourceId::new(),
        world_id: world,
        run,
        filename: "isles.md".into(),
        content_type: "text/markdown".into(),
        text: "Queen Maren rules.".into(),
        details,
        now: Utc::now().trunc_subsecs(6),
    };
    store.add_source(&source, chunks(2), JobId::new()).await.unwrap().0
}

conformance!(sources_keep_their_title_url_and_metadata);
async fn sources_keep_their_title_url_and_metadata(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let described = add_with_details(&store, world.id, details()).await;
    assert_eq!(described.details, details(), "the source as added");
    let (plain, _) = add_source(&store, world.id, 1).await;
    assert_eq!(plain.details, SourceDetails::default());
    assert_eq!(
        (plain.details.title, plain.details.url, plain.details.metadata.len()),
        (None, None, 0)
    );

    assert_eq!(
        store.get_source(world.id, described.id).await.unwrap().unwrap().details,
        details()
    );
    let listed: Vec<SourceDetails> = (store
        .list_sources(world.id, quarry::domain::Window::ALL)
        .await
        .unwrap()
        .into_iter())
    .map(|s| s.details)
    .collect();
    assert_eq!(listed, [details(), SourceDetails::default()]);

    // For retrieval's hits, by point: each chunk with its source's details, in its world only.
    let other = store.create_world(new_world("other")).await.unwrap();
    let elsewhere = add_with_details(&store, other.id, SourceDetails::default()).await;
    // Each claim takes one job's entries.
    let mut points: Vec<uuid::Uuid> = Vec::new();
    loop {
        let claimed = super::claim(&store, "x", 100).await;
        if claimed.is_empty() {
            break;
        }
        points.extend(claimed.iter().map(|item| item.point_id));
    }
    assert_eq!(points.len(), 5, "two chunks, one, and two elsewhere");
    let found = store.hits_by_points(world.id, world.active_run, &points).await.unwrap();
    let mut by_source: Vec<(SourceId, SourceDetails)> =
        found.into_iter().map(|(c, d)| (c.chunk.source_id, d)).collect();
    by_source.sort_by_key(|(id, _)| *id != described.id);
    assert_eq!(
        by_source,
        [
            (described.id, details()),
            (described.id, details()),
            (plain.id, SourceDetails::default())
        ]
    );
    let theirs = store.hits_by_points(other.id, other.active_run, &points).await.unwrap();
    assert!(
        theirs
            .iter()
            .all(|(c, d)| c.chunk.source_id == elsewhere.id && *d == SourceDetails::default())
    );
    assert_eq!(theirs.len(), 2);
    assert!(
        store
            .hits_by_points(world.id, world.active_run, &[])
            .await
            .unwrap()
            .is_empty()
    );
    // More points than one statement binds, read as one snapshot.
    let mut many: Vec<uuid::Uuid> = (0..1100).map(|_| uuid::Uuid::new_v4()).collect();
    many.insert(700, points[0]);
    let found = store.hits_by_points(world.id, world.active_run, &many).await.unwrap();
    assert_eq!(
        found.len(),
        usize::from(!theirs.iter().any(|(c, _)| c.point_id == points[0]))
    );
}

/// The world, run and source rows of a store at migration 0004, written as quarry wrote them
/// then; `$1` world, `$2` run, `$3` source, `$4` now.
const PRE_0005_ROWS: [&str; 3] = [
    "INSERT INTO worlds (id, name, provider, model, dimensions, max_tokens, overlap_tokens, hybrid, active_run_id, \
     collection, next_book_number, created_at, updated_at) VALUES ($1, 'old', 'local', 'all-MiniLM-L6-v2', 384, 192, \
     48, FALSE, $2, 'chunks_local_all-minilm-l6-v2_384', 2, $4, $4)",
    "INSERT INTO runs (id, world_id, provider, model, dimensions, max_tokens, overlap_tokens, collection, status, \
     created_at) VALUES ($2, $1, 'local', 'all-MiniLM-L6-v2', 384, 192, 48, 'chunks_local_all-minilm-l6-v2_384', \
     'active', $4)",
    "INSERT INTO sources (id, world_id, book_number, filename, content_type, text, sha256, chars, created_at) \
     VALUES ($3, $1, 1, 'old.txt', 'text/plain', 'Old.', 'c0ffee', 4, $4)",
];

/// Migrates the database at `url` up to 0004 from `dir`, writes [`PRE_0005_ROWS`] there; then
/// quarry opens it (applying 0005 and later) and reads the source back.
macro_rules! pre_0005_source_reads_back_without_details {
    ($pool:ty, $url:expr, $dir:literal) => {{
        let url: &str = $url;
        let (world, run, source) = (WorldId::new(), uuid::Uuid::new_v4(), SourceId::new());
        let pool = <$pool>::connect(url).await.unwrap();
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/", $dir));
        let migrator = sqlx::migrate::Migrator::new(dir).await.unwrap();
        migrator.run_to(4, &pool).await.unwrap();
        for statement in PRE_0005_ROWS {
            sqlx::query(statement)
                .bind(world.0)
                .bind(run)
                .bind(source.0)
                .bind(Utc::now().trunc_subsecs(6))
                .execute(&pool)
                .await
                .unwrap();
        }
        pool.close().await;

        let store = quarry::store::connect(url).await.unwrap();
        let old = store.get_source(world, source).await.unwrap().expect("the old source");
        assert_eq!((old.filename.as_str(), old.book_number), ("old.txt", 1));
        assert_eq!(old.details, SourceDetails::default(), "no title, no URL, metadata {{}}");
        assert_eq!(
            store.list_sources(world, quarry::domain::Window::ALL).await.unwrap(),
            std::slice::from_ref(&old)
        );
        // The world takes new sources, with details, beside it.
        let new = add_with_details(&store, world, details()).await;
        assert_eq!((new.book_number, new.details), (2, details()));
        store.close().await;
    }};
}

#[tokio::test]
async fn a_source_stored_before_0005_reads_back_without_details_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    pre_0005_source_reads_back_without_details!(sqlx::SqlitePool, &url, "sqlite");
}

#[tokio::test]
async fn a_source_stored_before_0005_reads_back_without_details_on_postgres() {
    let Some(db) =
        crate::helpers::PgDatabase::create("store_conformance::a_source_stored_before_0005_reads_back_without_details")
            .await
    else {
        return;
    };
    pre_0005_source_reads_back_without_details!(sqlx::PgPool, &db.url, "postgres");
    db.drop_db().await;
}
