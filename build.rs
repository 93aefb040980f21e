//! `sqlx::migrate!` embeds the migration files at compile time; without this, a new migration
//! file alone would not rebuild the crate, and a binary could start without it.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
