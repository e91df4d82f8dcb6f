//! The arguments of `lockjaw storage` (the protected storage run by hand
//! until Ctrl-C: [`super::serve::until_signal`]).

use super::{Fencing, StorageConfig};
use crate::exit::Exit;
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Run the fenced register/counter/set service (for manual use; `lockjaw
/// run` embeds it). Prints the address it listens on, serves until Ctrl-C
/// or SIGTERM, then prints its counters. Its help (the variant's doc in
/// `cli.rs`) says it has no authentication.
#[derive(clap::Args, Debug)]
pub struct StorageArgs {
    /// TCP port to listen on (0 = any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to listen on. No authentication: use loopback or a private
    /// network only.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind: IpAddr,
    /// Enforce the fence rule (refuse requests below a key's highest fence).
    #[arg(long, value_enum, default_value_t = Fencing::On)]
    pub fencing: Fencing,
    /// Initial value of a key as KEY=JSON, e.g. `counter=0` or `set=[]`;
    /// repeatable.
    #[arg(long, value_name = "KEY=JSON", value_parser = parse_initial)]
    pub initial: Vec<(String, Value)>,
}

fn parse_initial(s: &str) -> Result<(String, Value), String> {
    let (key, json) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not KEY=JSON (hint: e.g. --initial counter=0)"))?;
    let value = serde_json::from_str(json).map_err(|e| {
        format!("the value of `{key}` is not JSON: {e} (hint: quote strings: 'k=\"x\"')")
    })?;
    Ok((key.to_string(), value))
}

pub fn storage(args: StorageArgs) -> Exit {
    let mut config = StorageConfig::new(args.fencing);
    config.initial.extend(args.initial);
    let addr = SocketAddr::new(args.bind, args.port);
    match super::serve::until_signal(addr, config) {
        Ok(()) => Exit::Valid,
        Err(e) => crate::exit::fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_initial_values() {
        assert_eq!(
            parse_initial("counter=0").unwrap(),
            ("counter".into(), Value::from(0))
        );
        assert_eq!(parse_initial("s=[]").unwrap().1, Value::Array(vec![]));
        assert!(parse_initial("counter").unwrap_err().contains("KEY=JSON"));
        assert!(parse_initial("r=abc").unwrap_err().contains("not JSON"));
    }
}
