//! Cursor pagination: `page` / `next_page` cursors, and `prev_page` for the
//! bidirectional sessions list. Cursors are opaque, encode their sort order, and never point
//! past the last row.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::extract::QueryParams;
use mast_domain::query::{Direction, Scan};

/// A sort key a cursor can carry.
pub trait CursorKey: Clone + Sized {
    /// Renders the key into the cursor.
    fn render(&self) -> String;
    /// Reads a key back from a cursor.
    fn read(s: &str) -> Option<Self>;
}

impl CursorKey for String {
    fn render(&self) -> String {
        self.clone()
    }
    fn read(s: &str) -> Option<Self> {
        (!s.is_empty()).then(|| s.to_string())
    }
}

impl CursorKey for i64 {
    fn render(&self) -> String {
        self.to_string()
    }
    fn read(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Toward {
    Next,
    Prev,
}

fn encode(order: Direction, toward: Toward, key: &str) -> String {
    let o = if order == Direction::Ascending {
        'a'
    } else {
        'd'
    };
    let t = if toward == Toward::Next { 'n' } else { 'p' };
    format!(
        "page_{}",
        URL_SAFE_NO_PAD.encode(format!("v1:{o}{t}:{key}"))
    )
}

fn decode<K: CursorKey>(cursor: &str) -> Option<(Direction, Toward, K)> {
    let raw = URL_SAFE_NO_PAD.decode(cursor.strip_prefix("page_")?).ok()?;
    let s = String::from_utf8(raw).ok()?;
    let rest = s.strip_prefix("v1:")?;
    let (flags, key) = rest.split_once(':')?;
    let mut f = flags.chars();
    let order = match f.next()? {
        'a' => Direction::Ascending,
        'd' => Direction::Descending,
        _ => return None,
    };
    let toward = match f.next()? {
        'n' => Toward::Next,
        'p' => Toward::Prev,
        _ => return None,
    };
    Some((order, toward, K::read(key)?))
}

fn flip(d: Direction) -> Direction {
    match d {
        Direction::Ascending => Direction::Descending,
        Direction::Descending => Direction::Ascending,
    }
}

/// A parsed page request: what to ask the store, and how to turn its rows into a page.
#[derive(Debug, Clone)]
pub struct PageRequest<K> {
    order: Direction,
    toward: Toward,
    cursor: Option<K>,
    limit: i64,
}

impl<K: CursorKey> PageRequest<K> {
    /// Reads `page`, `limit` and (when `order_param` is true) `order` from the query.
    pub fn parse(
        q: &QueryParams,
        default_order: Direction,
        default_limit: i64,
        max_limit: i64,
        order_param: bool,
    ) -> Result<Self, ApiError> {
        let limit = q.limit(default_limit, max_limit)?;
        let explicit = if order_param {
            match q.get("order") {
                None => None,
                Some("asc") => Some(Direction::Ascending),
                Some("desc") => Some(Direction::Descending),
                Some(_) => return Err(ApiError::invalid("`order` must be `asc` or `desc`")),
            }
        } else {
            None
        };
        let Some(page) = q.get("page").filter(|p| !p.is_empty()) else {
            return Ok(PageRequest {
                order: explicit.unwrap_or(default_order),
                toward: Toward::Next,
                cursor: None,
                limit,
            });
        };
        let (order, toward, key) = decode::<K>(page)
            .ok_or_else(|| ApiError::invalid("`page` is not a valid cursor for this list"))?;
        if explicit.is_some_and(|e| e != order) {
            return Err(ApiError::invalid(
                "`page` cursor was issued for a different `order`",
            ));
        }
        Ok(PageRequest {
            order,
            toward,
            cursor: Some(key),
            limit,
        })
    }

    /// The same request with at most `max` rows a page.
    pub fn capped(mut self, max: i64) -> Self {
        self.limit = self.limit.min(max);
        self
    }

    /// The store scan: one row more than the page, to know whether another page exists.
    pub fn scan(&self) -> Scan<K> {
        let direction = match self.toward {
            Toward::Next => self.order,
            Toward::Prev => flip(self.order),
        };
        Scan {
            after: self.cursor.clone(),
            direction,
            limit: self.limit + 1,
        }
    }

    /// Trims the rows to a page and computes its cursors.
    pub fn finish<T>(&self, mut rows: Vec<T>, key: impl Fn(&T) -> K) -> Page<T> {
        let more = rows.len() as i64 > self.limit;
        rows.truncate(self.limit as usize);
        match self.toward {
            Toward::Next => {
                let next_page = more
                    .then(|| {
                        rows.last()
                            .map(|r| encode(self.order, Toward::Next, &key(r).render()))
                    })
                    .flatten();
                let prev_page = self.cursor.as_ref().map(|c| {
                    let first = rows
                        .first()
                        .map(|r| key(r).render())
                        .unwrap_or_else(|| c.render());
                    encode(self.order, Toward::Prev, &first)
                });
                Page {
                    data: rows,
                    next_page,
                    prev_page,
                }
            }
            Toward::Prev => {
                rows.reverse();
                let prev_page = more
                    .then(|| {
                        rows.first()
                            .map(|r| encode(self.order, Toward::Prev, &key(r).render()))
                    })
                    .flatten();
                let last = rows
                    .last()
                    .map(|r| key(r).render())
                    .or_else(|| self.cursor.as_ref().map(CursorKey::render));
                let next_page = last.map(|k| encode(self.order, Toward::Next, &k));
                Page {
                    data: rows,
                    next_page,
                    prev_page,
                }
            }
        }
    }
}

/// A page of a list. `prev_page` is only serialized by the bidirectional lists.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_page: Option<String>,
    #[serde(skip)]
    pub prev_page: Option<String>,
}

/// A page of the bidirectional sessions list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BiPage<T> {
    pub data: Vec<T>,
    pub next_page: Option<String>,
    pub prev_page: Option<String>,
}

impl<T> Page<T> {
    /// Maps the rows.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            next_page: self.next_page,
            prev_page: self.prev_page,
        }
    }

    /// The bidirectional form.
    pub fn bidirectional(self) -> BiPage<T> {
        BiPage {
            data: self.data,
            next_page: self.next_page,
            prev_page: self.prev_page,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(q: &str) -> PageRequest<i64> {
        PageRequest::parse(&QueryParams::parse(q), Direction::Descending, 2, 100, true).unwrap()
    }

    /// Simulates the store over keys 1..=5.
    fn run(r: &PageRequest<i64>) -> Page<i64> {
        let s = r.scan();
        let mut keys: Vec<i64> = (1..=5).collect();
        if s.direction == Direction::Descending {
            keys.reverse();
        }
        let rows: Vec<i64> = keys
            .into_iter()
            .filter(|k| match (s.after, s.direction) {
                (Some(a), Direction::Ascending) => *k > a,
                (Some(a), Direction::Descending) => *k < a,
                (None, _) => true,
            })
            .take(s.limit as usize)
            .collect();
        r.finish(rows, |k| *k)
    }

    #[test]
    fn walks_forward_and_back() {
        let p1 = run(&req(""));
        assert_eq!(p1.data, vec![5, 4]);
        assert!(p1.prev_page.is_none());
        let p2 = run(&req(&format!("page={}", p1.next_page.unwrap())));
        assert_eq!(p2.data, vec![3, 2]);
        let p3 = run(&req(&format!("page={}", p2.next_page.clone().unwrap())));
        assert_eq!(p3.data, vec![1]);
        assert!(p3.next_page.is_none(), "no cursor after the last page");
        let back = run(&req(&format!("page={}", p3.prev_page.unwrap())));
        assert_eq!(back.data, vec![3, 2]);
        let back2 = run(&req(&format!("page={}", back.prev_page.unwrap())));
        assert_eq!(back2.data, vec![5, 4]);
        assert!(back2.prev_page.is_none());
    }

    #[test]
    fn rejects_bad_cursors_and_order_mismatch() {
        let q = QueryParams::parse("page=garbage");
        assert!(PageRequest::<i64>::parse(&q, Direction::Descending, 2, 100, true).is_err());
        let p1 = run(&req(""));
        let q = QueryParams::parse(&format!("order=asc&page={}", p1.next_page.unwrap()));
        assert!(PageRequest::<i64>::parse(&q, Direction::Descending, 2, 100, true).is_err());
    }
}
