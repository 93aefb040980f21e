-- A value sealed with the master key, so that a process started with another key (an old one,
-- after `quarry keys rotate-master`, or another deployment's) is refused at startup instead of
-- failing on each secret it reads. One row at most.
CREATE TABLE master_key_check (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    ciphertext BLOB NOT NULL,
    nonce      BLOB NOT NULL
);
