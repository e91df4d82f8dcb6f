//! Interning JSON values to small integers, so model states are cheap to
//! hash and compare. Id 0 is always `null` (absent).

use serde_json::Value;
use std::collections::HashMap;

/// A table of distinct JSON values, each with a small id.
#[derive(Clone, Debug)]
pub struct Values {
    ids: HashMap<String, u32>,
    vals: Vec<Value>,
}

impl Default for Values {
    fn default() -> Self {
        let mut v = Values {
            ids: HashMap::new(),
            vals: Vec::new(),
        };
        v.intern(&Value::Null);
        v
    }
}

impl Values {
    /// The id of `null`, the absent value.
    pub const ABSENT: u32 = 0;

    /// The id of `v`, adding it if new. Equal JSON values get equal ids.
    pub fn intern(&mut self, v: &Value) -> u32 {
        let mut key = String::new();
        canonical(v, &mut key);
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.vals.len() as u32;
        self.ids.insert(key, id);
        self.vals.push(v.clone());
        id
    }

    pub fn get(&self, id: u32) -> &Value {
        &self.vals[id as usize]
    }

    /// A value as text: JSON, with `null` shown as `absent`.
    pub fn show(&self, id: u32) -> String {
        match self.get(id) {
            Value::Null => "absent".into(),
            v => v.to_string(),
        }
    }

    pub fn len(&self) -> usize {
        self.vals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }
}

/// JSON text with object keys sorted, whatever order the map keeps.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_an_id() {
        let mut v = Values::default();
        assert_eq!(v.intern(&Value::Null), Values::ABSENT);
        let a = v.intern(&serde_json::json!({"x": 1, "y": [2]}));
        assert_eq!(v.intern(&serde_json::json!({"y": [2], "x": 1})), a);
        assert_ne!(v.intern(&serde_json::json!(1)), a);
        assert_eq!(v.show(Values::ABSENT), "absent");
    }
}
