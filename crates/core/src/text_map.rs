//! Maps and sets keyed by text, kept as one sorted vector.
//!
//! Every map of the Worker and its objects is keyed by an id and bounded (a session's streams and
//! waiters, a queue's sockets and backlog, a cache of runs' sessions, the token table): a lookup is
//! a binary search, an insert or a removal moves the entries after it. std's `HashMap` compiles its
//! table code once per entry type and hashes each key twice over (SipHash, seeded from the
//! platform's randomness); across the Worker's five maps that was about 5 KB of the gzipped module.
//! Iteration is in key order.

/// A map from text keys to `V`, sorted by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextMap<V> {
    entries: Vec<(String, V)>,
}

impl<V> Default for TextMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> TextMap<V> {
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// A map of `entries` in any order, a repeated key keeping its last value.
    pub fn from_entries(mut entries: Vec<(String, V)>) -> Self {
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: among equal keys the last written stays last, and is the one kept.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<(String, V)> = Vec::with_capacity(entries.len());
            for e in entries {
                match kept.last_mut() {
                    Some(last) if last.0 == e.0 => *last = e,
                    _ => kept.push(e),
                }
            }
            entries = kept;
        }
        Self { entries }
    }

    /// The entries, in key order.
    pub fn entries(&self) -> &[(String, V)] {
        &self.entries
    }

    pub fn into_entries(self) -> Vec<(String, V)> {
        self.entries
    }

    /// Where `key` is (`Ok`), or where it would go (`Err`).
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Sets `key` to `value`; the value it replaced, if any.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`, made by `make` first if there is none.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key.to_owned(), make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Keeps the entries for which `keep` says so.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// A set of text keys, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextSet(TextMap<()>);

impl TextSet {
    pub const fn new() -> Self {
        Self(TextMap::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Adds `key`; whether it was not there yet.
    pub fn insert(&mut self, key: String) -> bool {
        self.0.insert(key, ()).is_none()
    }

    /// Removes `key`; whether it was there.
    pub fn remove(&mut self, key: &str) -> bool {
        self.0.remove(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_finds_replaces_and_removes_by_key_whatever_the_order_keys_came_in() {
        let mut m = TextMap::new();
        for (k, v) in [("b", 2), ("d", 4), ("a", 1), ("c", 3)] {
            assert_eq!(m.insert(k.to_owned(), v), None);
        }
        assert_eq!(m.insert("c".to_owned(), 30), Some(3), "replaced, not added");
        assert_eq!(m.len(), 4);
        assert_eq!(
            [m.get("a"), m.get("b"), m.get("c"), m.get("d"), m.get("e")],
            [Some(&1), Some(&2), Some(&30), Some(&4), None]
        );
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [1, 2, 30, 4]);
        *m.get_mut("a").unwrap() += 10;
        assert_eq!(m.remove("b"), Some(2));
        assert_eq!(m.remove("b"), None);
        assert!(!m.contains_key("b") && m.contains_key("a"));
        assert_eq!(m.get("a"), Some(&11));
    }

    #[test]
    fn get_or_insert_with_makes_a_value_only_for_a_missing_key() {
        let mut m: TextMap<Vec<u8>> = TextMap::new();
        m.get_or_insert_with("k", Vec::new).push(1);
        m.get_or_insert_with("k", || unreachable!("k exists"))
            .push(2);
        m.get_or_insert_with("a", Vec::new).push(3);
        assert_eq!(m.get("k"), Some(&vec![1, 2]));
        assert_eq!(
            m.values().cloned().collect::<Vec<_>>(),
            [vec![3], vec![1, 2]]
        );
        m.retain(|k, v| k == "a" || v.len() > 5);
        assert_eq!(m.len(), 1);
        assert!(m.contains_key("a"));
        m.clear();
        assert!(m.is_empty());
    }

    #[test]
    fn a_set_says_whether_an_insert_or_a_removal_changed_it() {
        let mut s = TextSet::new();
        assert!(s.insert("x".to_owned()));
        assert!(!s.insert("x".to_owned()));
        assert!(s.contains("x") && !s.contains("y"));
        assert_eq!(s.len(), 1);
        assert!(s.remove("x"));
        assert!(!s.remove("x"));
        assert!(s.is_empty());
    }
}
