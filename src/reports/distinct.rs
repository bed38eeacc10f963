//! Approximate distinct counts in a fixed 256 bytes: a HyperLogLog with 256 registers (standard
//! error about 6.5 %), mergeable by taking the larger of each register, so counts from time
//! slices and replicas combine without keeping the addresses themselves.
//!
//! Written here rather than taken from a crate: the estimator is a dozen lines, and the registers
//! must be one plain byte array that is serialised as is and merged by other replicas.

use std::hash::{BuildHasher, Hash};

use serde::{Deserialize, Serialize};

/// Registers: 2^8.
const REGISTERS: usize = 256;

/// A mergeable approximate count of distinct items.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Distinct {
    #[serde(with = "registers")]
    registers: Box<[u8; REGISTERS]>,
}

impl std::fmt::Debug for Distinct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Distinct(~{})", self.estimate())
    }
}

impl Default for Distinct {
    fn default() -> Self {
        Distinct {
            registers: Box::new([0; REGISTERS]),
        }
    }
}

/// The same hash in every replica and every run, so that registers from anywhere merge.
fn hash(item: &impl Hash) -> u64 {
    foldhash::fast::FixedState::with_seed(0x005e_ed0f_d15c_0de5).hash_one(item)
}

impl Distinct {
    /// Counts `item` (seen before or not).
    pub fn insert(&mut self, item: &impl Hash) {
        let hashed = hash(item);
        let register = (hashed & 0xff) as usize;
        let rest = hashed >> 8;
        // The position of the lowest set bit of the other 56 bits, from 1.
        let rank = (rest.trailing_zeros().min(56) + 1) as u8;
        if self.registers[register] < rank {
            self.registers[register] = rank;
        }
    }

    /// Folds `other` in: the count of the union.
    pub fn merge(&mut self, other: &Distinct) {
        for (mine, theirs) in self.registers.iter_mut().zip(other.registers.iter()) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// About how many distinct items were counted.
    pub fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let mut sum = 0.0;
        let mut zeros = 0usize;
        for &register in self.registers.iter() {
            sum += 2f64.powi(-i32::from(register));
            if register == 0 {
                zeros += 1;
            }
        }
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let raw = alpha * m * m / sum;
        // Small ranges: linear counting is exact enough and far better than the raw estimate.
        let estimate = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        estimate.round() as u64
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.registers.iter().all(|&r| r == 0)
    }
}

/// Registers as base64 text in JSON (the shared store holds them as such).
mod registers {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::REGISTERS;

    pub fn serialize<S: Serializer>(
        registers: &[u8; REGISTERS],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(registers))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Box<[u8; REGISTERS]>, D::Error> {
        let text = String::deserialize(deserializer)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)?;
        let registers: [u8; REGISTERS] = bytes
            .try_into()
            .map_err(|_| serde::de::Error::custom("a distinct count has 256 registers"))?;
        Ok(Box::new(registers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_counts_are_exact_or_nearly() {
        let mut distinct = Distinct::default();
        assert_eq!(distinct.estimate(), 0);
        for _ in 0..3 {
            for address in 0..5u32 {
                distinct.insert(&address);
            }
        }
        assert_eq!(distinct.estimate(), 5);
    }

    #[test]
    fn large_counts_are_within_a_few_standard_errors_and_merge_as_a_union() {
        let mut a = Distinct::default();
        let mut b = Distinct::default();
        for item in 0..20_000u32 {
            a.insert(&item);
        }
        for item in 10_000..30_000u32 {
            b.insert(&item);
        }
        let close = |estimate: u64, truth: f64| ((estimate as f64 - truth) / truth).abs() < 0.2;
        assert!(close(a.estimate(), 20_000.0), "{}", a.estimate());
        a.merge(&b);
        assert!(close(a.estimate(), 30_000.0), "{}", a.estimate());
        let json = serde_json::to_string(&a).expect("serialises");
        let back: Distinct = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, a);
    }
}
