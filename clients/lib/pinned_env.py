# Library versions for lockjaw's Python adapters (docs/adapters.md, "Library
# versions"): run the adapter with the Python of the pinned environment
# lockjaw names, and put a library source tree first on the path.
#   LOCKJAW_CLIENT_ENV=DIR      -> DIR/venv/bin/python runs this adapter
#                                  (built by clients/lib/build-env DIR)
#   LOCKJAW_CLIENT_VERSION=VER  -> the version the hello must name
#   LOCKJAW_CLIENT_SOURCE=PATH  -> PATH first on sys.path
# Without LOCKJAW_CLIENT_ENV the adapter's default version folder is used.
# Call use_env() before reading the hello: the exec keeps the process, its
# group and its unread stdin.
import os
import sys


def use_env(adapter_file, default_version):
    """Re-exec `adapter_file` with the venv of the chosen version folder
    (once; default_version None: without LOCKJAW_CLIENT_ENV, stay on this
    Python and its packages), then honour LOCKJAW_CLIENT_SOURCE. Exits 3 with the reason on
    stderr when the environment is missing."""
    here = os.path.dirname(os.path.realpath(adapter_file))
    env = os.environ.get("LOCKJAW_CLIENT_ENV")
    if not env and default_version:
        env = os.path.join(here, "versions", default_version)
    venv = os.path.realpath(os.path.join(env, "venv")) if env else None
    if venv and os.path.realpath(sys.prefix) != venv:
        python = os.path.join(venv, "bin", "python")
        if not os.access(python, os.X_OK):
            print("%s: %s is missing; build it with clients/lib/build-env %s "
                  "(scripts/install-deps.sh builds the default)" % (here, python, env),
                  file=sys.stderr, flush=True)
            sys.exit(3)
        os.execv(python, [python, os.path.realpath(adapter_file)])
    source = os.environ.get("LOCKJAW_CLIENT_SOURCE")
    if source:
        sys.path.insert(0, source)


def version_to_report(installed):
    """The version the hello names: LOCKJAW_CLIENT_VERSION if lockjaw asked
    for one (and the library found is that one; otherwise exit 3 with the
    reason), `source:PATH` for a source tree, else what is installed."""
    wanted = os.environ.get("LOCKJAW_CLIENT_VERSION")
    if wanted and not os.environ.get("LOCKJAW_CLIENT_SOURCE") and wanted != installed:
        print("the environment %s holds version %s, not %s: rebuild it"
              % (os.environ.get("LOCKJAW_CLIENT_ENV"), installed, wanted),
              file=sys.stderr, flush=True)
        sys.exit(3)
    source = os.environ.get("LOCKJAW_CLIENT_SOURCE")
    if source and not wanted:
        return "source:" + source  # a tree's version is whatever it says
    return wanted or installed


def import_or_exit(library, load):
    """Run `load` (the adapter's imports); a version whose code does not
    even compile on this Python exits 3 with the reason on stderr."""
    try:
        return load()
    except SyntaxError as e:
        print("%s %s does not import on Python %d.%d: %s (%s, line %s)"
              % (library, os.environ.get("LOCKJAW_CLIENT_VERSION", ""), sys.version_info[0],
                 sys.version_info[1], e.msg, e.filename, e.lineno),
              file=sys.stderr, flush=True)
        sys.exit(3)
