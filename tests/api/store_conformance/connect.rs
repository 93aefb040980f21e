//! Connecting: SQLite creates its file and folders and uses WAL; an unreachable Postgres is a
//! startup error.

use super::new_world;

#[tokio::test]
async fn sqlite_creates_the_file_and_its_folders_and_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/c/quarry.db");
    let store = quarry::store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert!(path.exists());
    store.create_world(new_world("w")).await.unwrap();
    assert!(
        dir.path().join("a/b/c/quarry.db-wal").exists(),
        "WAL mode keeps a -wal file beside the database"
    );
    store.close().await;
}

#[tokio::test]
async fn unreachable_postgres_is_a_startup_error() {
    // Port 9 (discard) refuses connections on loopback.
    let err = quarry::store::connect("postgres://nobody@127.0.0.1:9/none")
        .await
        .err()
        .expect("must fail");
    assert!(matches!(err, quarry::store::Error::Unavailable(_)), "{err:?}");
}
