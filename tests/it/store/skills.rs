//! Skills: a skill with its first version, more versions (same name only), workspace scoping,
//! list filters and pages, version deletion (never the last) and cascading skill deletion.

use mast::domain::ids::new_id;
use mast::domain::skill_bundle::BundleFile;
use mast::store::{
    Direction, NewSkillVersion, SkillRecord, SkillVersionDelete, SkillVersionRecord, StoreError,
};

use super::{WS, open, scan, scan_after};
use crate::backend_tests;
use crate::support::Backend;

backend_tests!(
    skills_round_trip_with_their_files,
    versions_keep_the_name_and_move_latest,
    deleting_versions_and_skills,
    skills_list_by_source_and_page,
);

fn version(skill_id: &str, name: &str, at: i64) -> NewSkillVersion {
    NewSkillVersion {
        version: SkillVersionRecord {
            id: new_id("skillver"),
            skill_id: skill_id.into(),
            name: name.into(),
            description: format!("{name} at {at}"),
            created_at: at,
        },
        files: vec![
            BundleFile {
                path: "SKILL.md".into(),
                executable: false,
                content: format!("---\nname: {name}\n---\n").into_bytes(),
            },
            BundleFile {
                path: "scripts/run.sh".into(),
                executable: true,
                content: vec![0, 159, 146, 150, b'\n'],
            },
        ],
    }
}

fn skill(ws: &str, name: &str, at: i64) -> (SkillRecord, NewSkillVersion) {
    let id = new_id("skill");
    let first = version(&id, name, at);
    let s = SkillRecord {
        id,
        workspace_id: ws.into(),
        display_name: format!("The {name}"),
        source: "custom".into(),
        name: name.into(),
        latest_version_id: first.version.id.clone(),
        created_at: at,
        updated_at: at,
    };
    (s, first)
}

async fn skills_round_trip_with_their_files(b: Backend) {
    let (store, _d) = open(b).await;
    let (s, first) = skill(WS, "pdf", 1_000);
    store.insert_skill(&s, &first).await.unwrap();
    assert_eq!(store.get_skill(WS, &s.id).await.unwrap(), Some(s.clone()));
    assert_eq!(store.get_skill("wrkspc_other", &s.id).await.unwrap(), None);
    let v = &first.version;
    assert_eq!(
        store.get_skill_version(WS, &s.id, &v.id).await.unwrap(),
        Some(v.clone())
    );
    assert_eq!(
        store
            .get_skill_version("wrkspc_other", &s.id, &v.id)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .get_skill_version(WS, "skill_other", &v.id)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.skill_files(&v.id).await.unwrap(), first.files);
    assert!(store.skill_files("skillver_none").await.unwrap().is_empty());
}

async fn versions_keep_the_name_and_move_latest(b: Backend) {
    let (store, _d) = open(b).await;
    let (s, first) = skill(WS, "pdf", 1_000);
    store.insert_skill(&s, &first).await.unwrap();
    let second = version(&s.id, "pdf", 2_000);
    let after = store.insert_skill_version(WS, &second).await.unwrap();
    assert_eq!(after.latest_version_id, second.version.id);
    assert_eq!(after.updated_at, 2_000);
    assert_eq!(store.get_skill(WS, &s.id).await.unwrap(), Some(after));

    let renamed = version(&s.id, "docx", 3_000);
    assert!(matches!(
        store.insert_skill_version(WS, &renamed).await,
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(
        store
            .get_skill_version(WS, &s.id, &renamed.version.id)
            .await
            .unwrap(),
        None,
        "a refused version leaves nothing"
    );
    assert!(matches!(
        store
            .insert_skill_version("wrkspc_other", &version(&s.id, "pdf", 4_000))
            .await,
        Err(StoreError::NotFound)
    ));
    let listed = store
        .list_skill_versions(WS, &s.id, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|v| &v.id).collect::<Vec<_>>(),
        [&second.version.id, &first.version.id]
    );
    let page = store
        .list_skill_versions(
            WS,
            &s.id,
            &scan_after(second.version.id.clone(), Direction::Descending, 10),
        )
        .await
        .unwrap();
    assert_eq!(page, vec![first.version.clone()]);
    assert!(
        store
            .list_skill_versions("wrkspc_other", &s.id, &scan(Direction::Descending, 10))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn deleting_versions_and_skills(b: Backend) {
    let (store, _d) = open(b).await;
    let (s, first) = skill(WS, "pdf", 1_000);
    store.insert_skill(&s, &first).await.unwrap();
    let second = version(&s.id, "pdf", 2_000);
    store.insert_skill_version(WS, &second).await.unwrap();
    let del = |ws: &'static str, id: String| {
        let store = store.clone();
        let sid = s.id.clone();
        async move {
            store
                .delete_skill_version(ws, &sid, &id, 5_000)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        del("wrkspc_other", second.version.id.clone()).await,
        SkillVersionDelete::NotFound
    );
    assert_eq!(
        del(WS, "skillver_none".into()).await,
        SkillVersionDelete::NotFound
    );
    assert_eq!(
        del(WS, second.version.id.clone()).await,
        SkillVersionDelete::Deleted
    );
    let now = store.get_skill(WS, &s.id).await.unwrap().unwrap();
    assert_eq!(now.latest_version_id, first.version.id, "latest falls back");
    assert_eq!(now.updated_at, 5_000);
    assert!(
        store
            .skill_files(&second.version.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        del(WS, first.version.id.clone()).await,
        SkillVersionDelete::Last
    );
    assert!(
        store
            .get_skill_version(WS, &s.id, &first.version.id)
            .await
            .unwrap()
            .is_some()
    );

    assert!(!store.delete_skill("wrkspc_other", &s.id).await.unwrap());
    assert!(store.delete_skill(WS, &s.id).await.unwrap());
    assert!(!store.delete_skill(WS, &s.id).await.unwrap());
    assert_eq!(store.get_skill(WS, &s.id).await.unwrap(), None);
    assert_eq!(
        store
            .get_skill_version(WS, &s.id, &first.version.id)
            .await
            .unwrap(),
        None
    );
    assert!(
        store
            .skill_files(&first.version.id)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn skills_list_by_source_and_page(b: Backend) {
    let (store, _d) = open(b).await;
    let mut made = Vec::new();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let (s, v) = skill(WS, name, i as i64);
        store.insert_skill(&s, &v).await.unwrap();
        made.push(s);
    }
    let (other, v) = skill("wrkspc_other", "o", 9);
    store.insert_skill(&other, &v).await.unwrap();
    let all = store
        .list_skills(WS, None, &scan(Direction::Descending, 10))
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|s| &s.id).collect::<Vec<_>>(),
        [&made[2].id, &made[1].id, &made[0].id]
    );
    let custom = store
        .list_skills(WS, Some("custom"), &scan(Direction::Ascending, 2))
        .await
        .unwrap();
    assert_eq!(custom, vec![made[0].clone(), made[1].clone()]);
    let next = store
        .list_skills(
            WS,
            Some("custom"),
            &scan_after(made[1].id.clone(), Direction::Ascending, 2),
        )
        .await
        .unwrap();
    assert_eq!(next, vec![made[2].clone()]);
    assert!(
        store
            .list_skills(WS, Some("anthropic"), &scan(Direction::Ascending, 10))
            .await
            .unwrap()
            .is_empty()
    );
}
