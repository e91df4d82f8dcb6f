//! The composite action (action.yml) and the workflow to copy
//! (examples/ci/github-actions.yml) through actionlint, which
//! scripts/install-deps.sh installs into .tools/venv
//! (scripts/requirements-tools.txt). actionlint reads a local action's
//! metadata where a workflow uses it (`uses: ./`), so the action is checked
//! through a small workflow that uses it, in a project of its own; a
//! misspelt input proves actionlint read it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn actionlint() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/venv/bin/actionlint");
    assert!(
        p.is_file(),
        "{} missing: run scripts/install-deps.sh (make deps)",
        p.display()
    );
    p
}

fn lint(cwd: &Path, files: &[&Path]) -> Output {
    Command::new(actionlint())
        .current_dir(cwd)
        .arg("-no-color")
        .args(files)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_example_workflow_passes_actionlint() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = lint(root, &[&root.join("examples/ci/github-actions.yml")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

const USER: &str = "on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
      - id: lj
        uses: ./
        with:
          tarball: lockjaw.tar.gz
          INPUT: \"false\"
      - run: echo \"${{ steps.lj.outputs.lockjaw }} ${{ steps.lj.outputs.ci-shard }}\"
";

#[test]
fn the_composite_action_passes_actionlint_where_a_workflow_uses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let wf = tmp.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap();
    // actionlint resolves `uses: ./` from the project's root, the folder
    // holding `.git`.
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("action.yml"),
        tmp.path().join("action.yml"),
    )
    .unwrap();
    let file = wf.join("use.yml");
    std::fs::write(&file, USER.replace("INPUT", "install-deps")).unwrap();
    let o = lint(tmp.path(), &[&file]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    std::fs::write(&file, USER.replace("INPUT", "install-dep")).unwrap();
    let o = lint(tmp.path(), &[&file]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("input \"install-dep\" is not defined"),
        "{}",
        text(&o)
    );
}
