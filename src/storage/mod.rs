//! The protected storage: a fenced register/counter/set service on loopback.
