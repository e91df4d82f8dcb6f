//! One state over all keys: any per-key model lifted to a map from key to
//! that model's state, checked as a single object (no partitioning).
//!
//! This is what `--one-state` checks. The state keeps an incrementally
//! updated hash (XOR of per-key hashes), so hashing it costs O(1) no matter
//! how many keys there are; equality still compares every key.

use super::{Encode, Model};
use crate::history::Op;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// A map from key index to the inner model's state.
#[derive(Clone, Debug)]
pub struct KeyedState<S> {
    hash: u64,
    vals: Box<[S]>,
}

impl<S: PartialEq> PartialEq for KeyedState<S> {
    fn eq(&self, o: &Self) -> bool {
        self.hash == o.hash && self.vals == o.vals
    }
}
impl<S: Eq> Eq for KeyedState<S> {}

impl<S> Hash for KeyedState<S> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

/// A small deterministic hasher for per-key state hashes.
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
}

fn key_hash<S: Hash>(key: u32, s: &S) -> u64 {
    let mut h = Mix(key as u64 + 1);
    s.hash(&mut h);
    h.finish()
}

/// Any model over all keys at once.
pub struct Keyed<M> {
    pub inner: M,
    keys: HashMap<Option<String>, u32>,
    names: Vec<Option<String>>,
}

impl<M> Keyed<M> {
    pub fn new(inner: M) -> Keyed<M> {
        Keyed {
            inner,
            keys: HashMap::new(),
            names: Vec::new(),
        }
    }

    fn key_name(&self, k: u32) -> &str {
        self.names[k as usize].as_deref().unwrap_or("(no key)")
    }
}

impl<M: Model> Model for Keyed<M> {
    type State = KeyedState<M::State>;
    type Input = (u32, M::Input);
    type Output = M::Output;

    fn step(
        &self,
        s: &Self::State,
        (k, input): &Self::Input,
        out: &M::Output,
    ) -> Option<Self::State> {
        let k = *k as usize;
        let old = &s.vals[k];
        let new = self.inner.step(old, input, out)?;
        if new == *old {
            return Some(s.clone());
        }
        let hash = s.hash ^ key_hash(k as u32, old) ^ key_hash(k as u32, &new);
        let mut vals = s.vals.to_vec();
        vals[k] = new;
        Some(KeyedState {
            hash,
            vals: vals.into_boxed_slice(),
        })
    }

    fn read_only(&self, (_, input): &Self::Input) -> bool {
        self.inner.read_only(input)
    }

    fn component(&self, (k, _): &Self::Input) -> u32 {
        *k
    }

    fn part_hash(&self, s: &Self::State, k: u32) -> u64 {
        key_hash(k, &s.vals[k as usize])
    }

    fn part_eq(&self, a: &Self::State, b: &Self::State, k: u32) -> bool {
        a.vals[k as usize] == b.vals[k as usize]
    }

    fn grows(&self, (_, input): &Self::Input) -> bool {
        self.inner.grows(input)
    }

    fn reachable(&self, s: &Self::State, (k, input): &Self::Input, out: &M::Output) -> bool {
        self.inner.reachable(&s.vals[*k as usize], input, out)
    }

    fn blind(&self, (_, input): &Self::Input) -> bool {
        self.inner.blind(input)
    }

    fn reachable_after(
        &self,
        (_, write): &Self::Input,
        (_, input): &Self::Input,
        out: &M::Output,
    ) -> bool {
        self.inner.reachable_after(write, input, out)
    }

    fn show_state(&self, s: &Self::State) -> String {
        let parts: Vec<String> = s
            .vals
            .iter()
            .enumerate()
            .map(|(k, v)| format!("{}: {}", self.key_name(k as u32), self.inner.show_state(v)))
            .collect();
        format!("{{{}}}", parts.join(", "))
    }

    fn show_op(&self, (k, input): &Self::Input, out: &M::Output) -> String {
        format!("{} @ {}", self.inner.show_op(input, out), self.key_name(*k))
    }
}

impl<M: Encode> Encode for Keyed<M> {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(Self::Input, M::Output), String> {
        let name = self.inner.partition_key(invoke);
        let next = self.names.len() as u32;
        let k = *self.keys.entry(name.clone()).or_insert(next);
        if k == next {
            self.names.push(name);
        }
        let (i, o) = self.inner.encode(invoke, ok)?;
        Ok(((k, i), o))
    }

    fn init_state(&mut self, _key: Option<&str>) -> Result<Self::State, String> {
        let names = self.names.clone();
        let vals = names
            .iter()
            .map(|n| self.inner.init_state(n.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        let hash = vals
            .iter()
            .enumerate()
            .fold(0, |h, (k, v)| h ^ key_hash(k as u32, v));
        Ok(KeyedState {
            hash,
            vals: vals.into_boxed_slice(),
        })
    }

    fn partition_key(&self, _invoke: &Op) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::models::cas_register::CasRegister;
    use crate::history::{OpType, Process};

    #[test]
    fn one_state_over_keys_hashes_by_content() {
        let mut m = Keyed::new(CasRegister::new(serde_json::Value::from(0), false));
        let mut w = |key: &str, v: i64| {
            let mut o = Op::new(0, Process::Num(0), OpType::Invoke, "write");
            o.key = Some(key.into());
            o.value = v.into();
            m.encode(&o, Some(&o)).unwrap()
        };
        let (a1, ao) = w("a", 1);
        let (b1, bo) = w("b", 1);
        let s0 = m.init_state(None).unwrap();
        let ab = m.step(&m.step(&s0, &a1, &ao).unwrap(), &b1, &bo).unwrap();
        let ba = m.step(&m.step(&s0, &b1, &bo).unwrap(), &a1, &ao).unwrap();
        assert_eq!(ab, ba);
        assert_ne!(ab, s0);
        assert_eq!(m.show_state(&ab), "{a: 1, b: 1}");
    }
}
