//! `lockjaw merge`'s flags and the command: read the manifests, check
//! them, place the runs, and have each command's module rebuild its
//! tables.

use super::place::Placer;
use crate::exit::Exit;
use crate::runner::shard::Manifest;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The shards' output directories (each `--out DIR` of a `--shard
    /// K/N` run), all N of them.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged tables go, with the runs linked (or copied) at
    /// the paths the unsharded command gives them.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Copy the run directories instead of linking them.
    #[arg(long)]
    pub copy: bool,
    #[command(flatten)]
    pub ci: crate::report::ci::CiArgs,
}

/// `lockjaw merge`.
pub fn merge(a: MergeArgs) -> Exit {
    match run(&a) {
        Ok(e) => e,
        Err(errs) => {
            for e in &errs {
                eprintln!("error: {e}");
            }
            Exit::Error
        }
    }
}

fn run(a: &MergeArgs) -> Result<Exit, Vec<String>> {
    let mut shards = vec![];
    let mut errs = vec![];
    for d in &a.dirs {
        match Manifest::read(d) {
            Ok(m) => shards.push((d.clone(), m)),
            Err(e) => errs.push(e),
        }
    }
    if let Some(d) = a.dirs.iter().find(|d| same_dir(d, &a.out)) {
        errs.push(format!(
            "--out {} is the shard {}: merge into a directory of its own",
            a.out.display(),
            d.display()
        ));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let errs = super::check(&shards);
    if !errs.is_empty() {
        return Err(errs);
    }
    let baseline = a.ci.load().map_err(|e| vec![e])?;
    let placer = Placer {
        out: a.out.clone(),
        copy: a.copy,
    };
    let place = |shard: &Path, rel: &str| placer.place(shard, rel);
    let one = |e: String| vec![e];
    let interrupted = shards.iter().any(|(_, m)| m.interrupted);
    let m0 = &shards[0].1;
    let (exit, cases) = match m0.command.as_str() {
        "compare" => {
            let (title, cells) =
                crate::runner::compare::sharded::rebuild(&shards, place).map_err(one)?;
            crate::report::compare::write_compare(&a.out, &title, &cells)
                .map_err(|e| one(format!("{}: {e}", a.out.display())))?;
            print!(
                "{}",
                crate::report::compare::compare_terminal(&title, &cells, &a.out)
            );
            let failed = cells.iter().any(|c| {
                matches!(
                    c.outcome,
                    crate::report::compare::CellOutcome::Failed { .. }
                )
            });
            let e = if failed { Exit::Error } else { Exit::Valid };
            (e, crate::runner::compare::ci::cases(&cells))
        }
        "bugs-table" => {
            let (md, e, cases) =
                crate::bugs::shard::rebuild(&shards, &a.out, place).map_err(one)?;
            print!("{md}");
            (e.merge(crate::bugs::table::write_file(&a.out, &md)), cases)
        }
        "runs" => crate::runner::runs_shard::rebuild(&shards, &a.out, place).map_err(one)?,
        "explore" => {
            let r = crate::explore::shard::join(&shards, |d, name| placer.place_dir(d, name))
                .map_err(one)?;
            crate::explore::output::write(&a.out, &r).map_err(one)?;
            println!("{}", r.split.as_deref().unwrap_or_default());
            let e = match crate::explore::output::exit(&r, r.min_landed.max(1)) {
                0 => Exit::Valid,
                1 => Exit::Invalid,
                _ => Exit::Unknown,
            };
            (e, crate::explore::ci::cases(&r))
        }
        "sweep" => {
            let s = crate::runner::sweep::sharded::rebuild(&shards, place).map_err(one)?;
            crate::report::sweep::write_sweep(&a.out, &s)
                .map_err(|e| one(format!("{}: {e}", a.out.display())))?;
            print!("{}", crate::report::sweep::sweep_md(&s));
            let failed = s
                .systems
                .iter()
                .any(|x| x.rows.iter().any(|r| r.error.is_some()));
            (if failed { Exit::Error } else { Exit::Valid }, vec![])
        }
        other => {
            return Err(one(format!(
                "{}: a shard of `{other}`, which this lockjaw cannot merge",
                shards[0].0.display()
            )))
        }
    };
    println!(
        "merged {} shard(s) of {} (plan {}, seed {}) into {}",
        shards.len(),
        m0.command,
        &m0.plan_hash[..m0.plan_hash.len().min(12)],
        m0.seed,
        a.out.display()
    );
    let exit = a.ci.finish(&baseline, cases).unwrap_or(exit);
    Ok(if interrupted {
        println!("a shard was interrupted: its units not run are missing or marked");
        exit.merge(Exit::Unknown)
    } else {
        exit
    })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
