//! Migrations as earlier releases numbered and worded them. The migrations were renumbered
//! without gaps, and comments citing documents outside the repository were reworded (which
//! changes a file's checksum); a database migrated by an earlier release records the old
//! numbers and checksums. Before migrating, each backend rewrites exactly those rows — the
//! old number together with the old file's checksum — to the migration's number and checksum
//! today, so such a database upgrades as if it had always been numbered this way. A row that
//! matches neither the old form nor today's is refused by the migrator as before.

use sqlx::migrate::Migrator;

/// One migration as an earlier release recorded it.
struct Earlier {
    /// The version it was recorded under.
    version: i64,
    /// Its version today.
    now: i64,
    /// SHA-384 of the file as it was, hex.
    checksum: &'static str,
}

/// Postgres's renumbered or reworded migrations.
const POSTGRES: &[Earlier] = &[
    Earlier {
        version: 7,
        now: 7,
        checksum: "00d2f00decd62c26451292f7168e4d63967d4f8592381bfc92290afab7b193cb00560232a07fdf09c931ea1cf608fe0d",
    },
    Earlier {
        version: 10,
        now: 9,
        checksum: "694cf6569c13bb34d93bdcb08090d9114def415246e7f03b9423d7e6e36c335efebeba966f8c366839eb545429fb1d61",
    },
    Earlier {
        version: 11,
        now: 10,
        checksum: "a05b73d494974c4e7be55d864105605a48c243273ec8dbed25b5ca3697eb5477a3070e6f96d0b01c1961f783a6c6c9cc",
    },
    Earlier {
        version: 14,
        now: 11,
        checksum: "3ae9bcdb87fb5c73dfd7c8c574242b7aa31d59f2d21c1ee4f11df004a6914be636bf2d3b93adb7c3020fe51799a95fd5",
    },
    Earlier {
        version: 15,
        now: 12,
        checksum: "f060ed8aaa6efed6ad0993b95554cab18a92ad6a8df6355bbba53b05f481dd6dd040d0d18f777a788a23892ece9a7ede",
    },
    Earlier {
        version: 16,
        now: 13,
        checksum: "6978a8fb121b85ef5800029a2e02cfc5e8062470b783171c557c124755782aff4569da65f76068e78d9871df109a5ee0",
    },
    Earlier {
        version: 17,
        now: 14,
        checksum: "9978407630228ee201968f0997e41bbb0b52a24ffbdeb631fb7dc233cf9cc70e8a5b009da4543b66c9f4a214cd0b9218",
    },
    Earlier {
        version: 18,
        now: 15,
        checksum: "d8b55d16ab3c826383773b572746ee3f981a0c1fa6d460c9c7d2939f58fee8be2edd2f237008d7348208dfb6f9decf0f",
    },
    Earlier {
        version: 19,
        now: 16,
        checksum: "f3f2320df8cc88d23782b30ca55fb04025f754b997b3cda65eaa8420845d0ab9a6156d9528c43e501559776c28ff6df7",
    },
    Earlier {
        version: 20,
        now: 17,
        checksum: "eb458e3ab35ed0fc4967315f34e51a5e8f2f08254d2203d233d5492637ac9370a1e10c23585db42c0228aa4f34817131",
    },
];

/// SQLite's renumbered or reworded migrations.
const SQLITE: &[Earlier] = &[
    Earlier {
        version: 7,
        now: 7,
        checksum: "3f35de8fbbe10be92ddf41d2e52fee2e1658daff8f541497d20870c80153800eb60f2877aa7e8bf52547556e159226bb",
    },
    Earlier {
        version: 10,
        now: 9,
        checksum: "3d04fdf1240021fbda84e88e869a2bfbc078da2163060e6c696442893642dcde26f5db55849ba968b21933b2506a00ee",
    },
    Earlier {
        version: 11,
        now: 10,
        checksum: "b8b068c899c983e0496ed3e47095ddbb5a3ef3237eb0274f3f69a7849157a845eeae9a810ff09474ce67c3ecb8419c62",
    },
    Earlier {
        version: 14,
        now: 11,
        checksum: "d6d6ccb41fd59debe230b83027fea2c89cacc94488baefedd182adb7a8c4e0e50961ed44045a6228796ee5680528e6b5",
    },
    Earlier {
        version: 15,
        now: 12,
        checksum: "2b38b94ee9083c68f864b3b2f401c6e1cde63a8e4d0dd0e80c019ca59213f82d10b59ca62dc3408a4c0c695842055152",
    },
    Earlier {
        version: 16,
        now: 13,
        checksum: "71a5beec298e275079c038df566cd46b1e3d62cd573644f783029279b36598d53339ed7881438a8ec7392f045dca8ee8",
    },
    Earlier {
        version: 17,
        now: 14,
        checksum: "9978407630228ee201968f0997e41bbb0b52a24ffbdeb631fb7dc233cf9cc70e8a5b009da4543b66c9f4a214cd0b9218",
    },
];

/// A row to rewrite: the recorded (version, checksum) and what they become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub old_version: i64,
    pub old_checksum: Vec<u8>,
    pub version: i64,
    pub checksum: Vec<u8>,
}

/// Which backend's history.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// The rewrites for `backend`, against the migrations `migrator` carries, in ascending order
/// of today's version: each target number is then either a gap of the old numbering or one
/// an earlier rewrite vacated, so no rewrite collides with a row still to move.
pub fn rewrites(backend: Backend, migrator: &Migrator) -> Vec<Rewrite> {
    let earlier = match backend {
        Backend::Postgres => POSTGRES,
        Backend::Sqlite => SQLITE,
    };
    let mut out: Vec<Rewrite> = earlier
        .iter()
        .map(|e| {
            let m = migrator
                .iter()
                .find(|m| m.version == e.now)
                .expect("every renumbered migration is embedded");
            Rewrite {
                old_version: e.version,
                old_checksum: hex(e.checksum),
                version: e.now,
                checksum: m.checksum.to_vec(),
            }
        })
        .collect();
    out.sort_by_key(|r| r.version);
    out
}

/// The newest migration among `recorded` (version, checksum) rows, in today's numbering: a
/// row an earlier release recorded counts as the migration it is now. What `mast doctor`
/// reports for a database it does not migrate.
pub fn newest_applied(backend: Backend, migrator: &Migrator, recorded: &[(i64, Vec<u8>)]) -> i64 {
    let rewrites = rewrites(backend, migrator);
    recorded
        .iter()
        .map(|(v, sum)| {
            rewrites
                .iter()
                .find(|r| r.old_version == *v && &r.old_checksum == sum)
                .map_or(*v, |r| r.version)
        })
        .max()
        .unwrap_or(0)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex checksum"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static PG: Migrator = sqlx::migrate!("migrations/postgres");
    static LITE: Migrator = sqlx::migrate!("migrations/sqlite");

    #[test]
    fn migrations_are_numbered_without_gaps() {
        for m in [&PG, &LITE] {
            let versions: Vec<i64> = m.iter().map(|m| m.version).collect();
            let expected: Vec<i64> = (1..=versions.len() as i64).collect();
            assert_eq!(versions, expected);
        }
    }

    #[test]
    fn rewrites_never_collide_with_a_row_still_to_move() {
        for (b, m) in [(Backend::Postgres, &PG), (Backend::Sqlite, &LITE)] {
            let rewrites = rewrites(b, m);
            // The versions an old database may hold: every old number of a moved migration,
            // and every migration not moved.
            let moved: Vec<i64> = rewrites.iter().map(|r| r.version).collect();
            let mut held: Vec<i64> = m
                .iter()
                .map(|m| m.version)
                .filter(|v| !moved.contains(v))
                .collect();
            held.extend(rewrites.iter().map(|r| r.old_version));
            for r in &rewrites {
                held.retain(|v| *v != r.old_version);
                assert!(
                    !held.contains(&r.version),
                    "{b:?}: {} → {} collides",
                    r.old_version,
                    r.version
                );
                held.push(r.version);
            }
            // A reworded file's old checksum differs from today's; a renumbered one may not.
            for r in &rewrites {
                assert!(r.old_version != r.version || r.old_checksum != r.checksum);
            }
        }
    }
}
