//! Listing a memory store's tree (`GET /v1/memory_stores/{id}/memories`): memories below a
//! prefix in path order, those deeper than `depth` rolled up into `memory_prefix` items that
//! count toward the page like memories do.

use mast_domain::memory::{MemoryListItem, MemoryPrefix, MemoryPrefixTag, past_prefix, roll_up};
use mast_store::{Store, StoreResult};

/// One page of a listing, and where the next one starts (a path bound, inclusive) when there
/// is more.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    pub items: Vec<MemoryListItem>,
    pub next_from: Option<String>,
}

/// The smallest key after `path` (paths hold no control characters, so nothing sorts
/// between `path` and this one).
fn just_after(path: &str) -> String {
    format!("{path}\u{1}")
}

/// Lists `limit` items of the store below `prefix` at `depth` (0 = every memory), starting at
/// the path bound `from` (inclusive). A rolled-up prefix is listed once: the scan then skips
/// past every path it covers.
pub async fn list_page(
    store: &dyn Store,
    ws: &str,
    store_id: &str,
    prefix: &str,
    depth: usize,
    from: Option<String>,
    limit: usize,
) -> StoreResult<ListPage> {
    // Each item with the bound just past it; one item more than the page tells whether
    // another page exists.
    let mut items: Vec<(MemoryListItem, String)> = Vec::new();
    let mut from = from.unwrap_or_else(|| prefix.to_string());
    while items.len() <= limit {
        let batch = (limit + 1 - items.len()) as i64;
        let rows = store
            .list_memories(ws, store_id, prefix, Some(&from), batch)
            .await?;
        let exhausted = (rows.len() as i64) < batch;
        for m in rows {
            if m.path.as_str() < from.as_str() || items.len() > limit {
                continue;
            }
            match roll_up(&m.path, prefix, depth) {
                None => {
                    from = just_after(&m.path);
                    items.push((MemoryListItem::Memory(Box::new(m)), from.clone()));
                }
                Some(p) => {
                    from = past_prefix(&p);
                    items.push((
                        MemoryListItem::Prefix(MemoryPrefix {
                            tag: MemoryPrefixTag::Tag,
                            path: p,
                        }),
                        from.clone(),
                    ));
                }
            }
        }
        if exhausted {
            break;
        }
    }
    let next_from = (items.len() > limit).then(|| items[limit - 1].1.clone());
    items.truncate(limit);
    Ok(ListPage {
        items: items.into_iter().map(|(i, _)| i).collect(),
        next_from,
    })
}
