//! A seeded generator shared by the randomised suites.

use serde_json::{Value, json};

/// A small deterministic generator (xorshift64*), so a failing input can be replayed by seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    pub(crate) fn string(&mut self) -> String {
        let alphabet = [
            "a", "Z", "0", "_", ".", "/", "..", "%2e", "\\", "\"", "{", "}", "[", "]", ":", ",",
            "\u{0}", "\u{202e}", "é", "😀", " ", "\n", "$", "'", "`",
        ];
        let len = self.below(24);
        (0..len).map(|_| *self.pick(&alphabet)).collect()
    }
    pub(crate) fn value(&mut self, depth: u32) -> Value {
        match self.below(if depth > 3 { 5 } else { 8 }) {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64),
            3 => json!(f64::from(self.below(1000) as u32) / 7.0),
            4 => json!(self.string()),
            5 | 6 => {
                let n = self.below(4);
                let mut map = serde_json::Map::new();
                for _ in 0..n {
                    map.insert(self.string(), self.value(depth + 1));
                }
                Value::Object(map)
            }
            _ => Value::Array((0..self.below(4)).map(|_| self.value(depth + 1)).collect()),
        }
    }
}
