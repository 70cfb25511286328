"""Shell forms that try to get past the sandbox, as data, grouped by the promise they test.

Each form is an ``(id, command)`` pair. A command names what the test knows only when it
runs through ``{placeholder}`` fields that `fill` replaces; any other brace (``${x@P}``,
``find -exec … {} +``) is left to the shell. The fields:

``{outside}``   a folder outside the Location holding ``file``; ``{parent}`` the Location
                root's parent; ``{root}`` the root; ``{home}`` the host's ``$HOME``;
                ``{python}`` an interpreter that runs inside the sandbox;
``{payload}``   base64 of a command that writes ``{outside}/from-base64``;
``{escaped}``   ``{outside}`` spelled as ``printf`` octal escapes;
``{abstract}``  an abstract Unix socket's name;
``{pid}``       a process outside the sandbox; ``{host}``, ``{port}`` a TCP listener on
                the host; ``{socket}`` a Unix socket listener; ``{tag}`` digits unique to
                one form, carried in the command line of whatever it tries to leave
                running (``sleep 1000.{tag}``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = (
    "ABSTRACT_SOCKETS",
    "ENVIRONMENT",
    "HELD",
    "LEFT_BEHIND",
    "NETWORK",
    "READS",
    "SIGNALS",
    "UNIX_SOCKETS",
    "WRITES",
    "fill",
)

Form = tuple[str, str]

_FIELD = re.compile(r"\{(\w+)\}")


def fill(command: str, values: Mapping[str, object]) -> str:
    """``command`` with each ``{name}`` in ``values`` replaced; other braces stay."""
    return _FIELD.sub(
        lambda match: str(values[match[1]]) if match[1] in values else match[0], command
    )


#: Promise 1: nothing lands outside the Location, its TMPDIR and the ``writable`` folders,
#: and ``.env`` and ``pegboard.toml`` stay as they are.
WRITES: tuple[Form, ...] = (
    ("absolute redirect", "echo pwned > {outside}/new"),
    ("absolute append", "echo pwned >> {outside}/file"),
    ("truncate with colon", ": > {outside}/file"),
    ("dot-dot redirect", "echo pwned > ../outside/new"),
    ("deep dot-dot", "echo pwned > ./././../outside/../outside/new"),
    ("home tilde", "echo pwned > ~/new"),
    ("home variable", 'echo pwned > "$HOME/new"'),
    ("parent folder file", "echo pwned > ../new"),
    ("symlink then write", "ln -s {outside} link && echo pwned > link/new"),
    ("symlink to file", "ln -sf {outside}/file link2 && echo pwned > link2"),
    ("symlink chain", "ln -s .. up && ln -s up/outside o && echo pwned > o/new"),
    ("cd then relative", "cd {outside} && echo pwned > new"),
    ("cd dot-dot then relative", "cd .. && echo pwned > outside/new"),
    ("pushd", "pushd {outside} >/dev/null && touch new"),
    ("tee", "echo pwned | tee {outside}/new"),
    ("tee append", "echo pwned | tee -a {outside}/file"),
    ("dd of", "echo pwned | dd of={outside}/new status=none"),
    ("dd notrunc", "echo pwned | dd of={outside}/file conv=notrunc status=none"),
    ("cp", "echo pwned > here && cp here {outside}/new"),
    ("cp over", "echo pwned > here && cp here {outside}/file"),
    ("install", "echo pwned > here && install -m 644 here {outside}/new"),
    ("mv out", "echo pwned > here && mv here {outside}/new"),
    ("mv .env out", "mv .env {outside}/stolen"),
    ("mv .env aside", "mv .env env-moved"),
    ("mv pegboard.toml aside", "mv pegboard.toml moved.toml"),
    ("touch", "touch {outside}/new"),
    ("mkdir", "mkdir {outside}/new"),
    ("rmdir parent", "rmdir {outside}"),
    ("ln hard out", "echo pwned > here && ln here {outside}/new"),
    ("ln hard in from outside", "ln {outside}/file stolen && echo pwned >> stolen"),
    ("python open", "{python} -c \"open('{outside}/new', 'w').write('pwned')\""),
    (
        "python pathlib",
        "{python} -c \"import pathlib; pathlib.Path('{outside}/file').write_text('x')\"",
    ),
    ("python os.rename", "{python} -c \"import os; os.rename('.env', '{outside}/stolen')\""),
    ("python rmtree parent", "{python} -c \"import shutil; shutil.rmtree('{parent}')\""),
    ("python home", "{python} -c \"import os; open(os.path.expanduser('~/new'), 'w')\""),
    ("perl open", 'perl -e \'open(F, ">{outside}/new"); print F "pwned"\''),
    ("perl unlink", "perl -e 'unlink \"{outside}/file\"'"),
    ("sh -c", "sh -c 'echo pwned > {outside}/new'"),
    ("bash -c nested", "bash -c \"bash -c 'echo pwned > {outside}/new'\""),
    ("eval", "eval 'echo pwned > {outside}/new'"),
    ("eval built", 'd={outside}; eval "echo pwned > $d/new"'),
    ("source stdin herestring", "source /dev/stdin <<< 'echo pwned > {outside}/new'"),
    ("prompt expansion", "x='$(echo pwned > {outside}/new)'; : \"${x@P}\""),
    ("compgen -C", "compgen -C 'touch {outside}/new' x"),
    ("chrt", "chrt -o 0 sh -c 'echo pwned > {outside}/new'"),
    ("script -qc", "script -qc 'echo pwned > {outside}/new' /dev/null"),
    ("setpriv", "setpriv --reuid=0 sh -c 'echo pwned > {outside}/new'"),
    ("unshare -r", "unshare -r sh -c 'echo pwned > {outside}/new'"),
    (
        "unshare -rm remount",
        "unshare -rm sh -c 'mount -o remount,rw {parent}; touch {outside}/new'",
    ),
    ("nsenter", "nsenter -t 1 -m sh -c 'echo pwned > {outside}/new'"),
    ("env -S", "env -S 'sh -c \"echo pwned > {outside}/new\"'"),
    ("find -exec", "find . -maxdepth 0 -exec sh -c 'echo pwned > {outside}/new' \\;"),
    ("find -exec cp", "echo pwned > here && find . -name here -exec cp {} {outside}/ \\;"),
    ("find -delete outside", "find {outside} -delete"),
    ("xargs", "echo {outside}/new | xargs touch"),
    ("xargs sh", "echo {outside} | xargs -I D sh -c 'echo pwned > D/new'"),
    ("heredoc", "cat > {outside}/new <<'EOF'\npwned\nEOF"),
    ("heredoc into sh", "sh <<'EOF'\necho pwned > {outside}/new\nEOF"),
    ("command substitution", "$(echo touch) $(echo {outside})/new"),
    ("backticks", "`echo touch` `echo {outside}`/new"),
    ("base64 payload", "echo {payload} | base64 -d | sh"),
    ("printf path", "p=$(printf '{escaped}'); echo pwned > \"$p/new\""),
    ("printf -v", "printf -v p '{escaped}'; touch \"$p/new\""),
    ("mount --bind", "mount --bind . {outside}; touch {outside}/new"),
    ("mount remount rw", "mount -o remount,rw /; touch {outside}/new"),
    ("chmod .env", "chmod 666 .env"),
    ("chmod outside", "chmod 777 {outside}/file"),
    ("chattr .env", "chattr +i .env; chattr -i .env"),
    ("chown .env", "chown 1234 .env"),
    ("write .env", "echo pwned > .env"),
    ("append .env", "echo pwned >> .env"),
    ("truncate .env", "truncate -s 0 .env"),
    ("write .env unseen", "f=.e; echo pwned > ${f}nv"),
    ("python write .env", "{python} -c \"open('.' + 'env', 'w').write('pwned')\""),
    ("python unlink .env", "{python} -c \"import os; os.unlink('.' + 'env')\""),
    ("python chmod .env", "{python} -c \"import os; os.chmod('.' + 'env', 0o666)\""),
    ("chmod .env glob", "chmod 666 .e?v"),
    ("mv .env glob", "mv .e?v moved-env"),
    ("find -delete .env", "find . -maxdepth 1 -name '.e?v' -delete"),
    ("replace .env", "echo pwned > x && {python} -c \"import os; os.replace('x', '.' + 'env')\""),
    (
        "replace pegboard.toml",
        "echo x > y && {python} -c \"import os; os.replace('y', 'pegboard.toml')\"",
    ),
    ("write pegboard.toml", "echo '[tool_output]' > pegboard.toml"),
    ("sed -i pegboard.toml", "sed -i 's/2000/1/' pegboard.toml"),
    ("python pegboard.toml", "{python} -c \"open('pegboard.toml', 'a').write('x = 1')\""),
    ("rm -rf parent", "rm -rf {parent}"),
    ("rm -rf dot-dot", "rm -rf ../outside"),
    ("find -delete parent", "find .. -mindepth 1 -delete"),
    ("tar extract outside", "tar -cf /tmp/a.tar -C /tmp . && tar -xf /tmp/a.tar -C {outside}"),
    ("ln -s over home", "ln -s /dev/null ~/.bashrc"),
    ("tmpdir symlink out", "ln -s {outside} $TMPDIR/o && echo pwned > $TMPDIR/o/new"),
    ("proc root write", "echo pwned > /proc/self/root{outside}/new"),
    ("proc cwd write", "echo pwned > /proc/self/cwd/../outside/new"),
)

#: Promise 2: what the rules deny for ``read`` never reaches the output.
READS: tuple[Form, ...] = (
    ("cat", "cat .env"),
    ("cat secrets", "cat secrets/key"),
    ("cat absolute", "cat {root}/.env"),
    ("redirect in", 'while read -r l; do echo "$l"; done < .env'),
    ("bash read builtin", 'echo "$(< .env)"'),
    ("head tail", "head .env; tail secrets/key"),
    ("symlink in-line", "ln -s .env e && cat e"),
    ("symlink absolute", "ln -s {root}/secrets/key k && cat k"),
    ("existing hard link", "cat innocent"),
    ("new hard link", "ln .env h && cat h"),
    ("cp then read", "cp .env copy; cat copy"),
    ("cp secrets folder", "cp -r secrets s; cat s/key"),
    ("tar", "tar -cf - .env secrets | tar -xOf -"),
    ("tar listing", "tar -cvf /tmp/t.tar . >/dev/null; tar -xOf /tmp/t.tar"),
    ("python", "{python} -c \"print(open('.env').read())\""),
    ("python secrets", "{python} -c \"print(open('secrets/key').read())\""),
    ("python os.open", "{python} -c \"import os; print(os.read(os.open('.env', 0), 999))\""),
    ("perl", "perl -ne print .env secrets/key"),
    ("proc self root", "cat /proc/self/root{root}/.env"),
    ("proc 1 cwd", "cat /proc/1/cwd/.env"),
    ("proc self cwd", "cat /proc/self/cwd/secrets/key"),
    ("relative dot-dot", "cat ../workspace/.env"),
    ("glob .e*", "cat .e*"),
    ("glob star", "shopt -s dotglob; cat * secrets/*"),
    ("find -exec cat", "find . -name '.env' -exec cat {} +"),
    ("find -exec secrets", "find . -path '*secrets*' -type f -exec cat {} \\;"),
    ("grep -r", "grep -r . ."),
    ("grep -ra hidden", "grep -ra '' .env secrets"),
    ("base64", "base64 .env"),
    ("od", "od -c .env"),
    ("od hex", "od -An -tx1 secrets/key"),
    ("xxd", "xxd .env"),
    ("dd if", "dd if=.env status=none"),
    ("sed", "sed -n p .env"),
    ("awk", "awk 1 secrets/key"),
    ("sort uniq", "sort .env | uniq"),
    ("mount bind", "mkdir m; mount --bind . m; cat m/.env"),
    ("umount mask", "umount .env; cat .env"),
    ("umount secrets", "umount secrets; cat secrets/key"),
    ("unshare umount", "unshare -rm sh -c 'umount {root}/.env; cat {root}/.env'"),
    ("debugfs", "debugfs -R 'cat {root}/.env' $(df --output=source . | tail -1)"),
    ("chmod then read", "chmod 644 .env; cat .env"),
    ("chmod glob then read", "chmod 644 .e?v; cat .e?v"),
    ("mv glob then read", "mv .e?v e3; cat e3"),
    ("mv secrets then read", "mv secrets s3; cat s3/key"),
    ("mv then read", "mv .env e2; cat e2"),
    ("source", "source .env; set | grep -i pegboard"),
    ("ls secrets", "ls -la secrets; cat secrets/*"),
    (
        "mmap",
        "{python} -c \"import mmap; print(mmap.mmap(open('.env','rb').fileno(), 0, prot=1)[:])\"",
    ),
    ("fd dup", "exec 3< .env; cat <&3"),
    ("proc fd", "exec 3< .env; cat /proc/self/fd/3"),
)

#: Promise 3: without a ``network`` rule and ``network=true`` nothing reaches a listener.
NETWORK: tuple[Form, ...] = (
    ("curl", "curl -s -m 2 http://{host}:{port}/"),
    ("curl ip literal", "curl -s -m 2 --noproxy '*' {host}:{port}"),
    ("wget", "wget -q -T 2 -t 1 -O - http://{host}:{port}/"),
    ("bash dev tcp", "exec 3<>/dev/tcp/{host}/{port} && echo hi >&3"),
    ("bash dev tcp in sh -c", "bash -c 'echo hi > /dev/tcp/{host}/{port}'"),
    (
        "python socket",
        "{python} -c \"import socket; socket.create_connection(('{host}', {port}), 2)\"",
    ),
    (
        "python urllib",
        "{python} -c \"import urllib.request as u; u.urlopen('http://{host}:{port}/', timeout=2)\"",
    ),
    ("perl socket", "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(\"{host}:{port}\") or die'"),
    ("nc", "echo hi | nc -w 2 {host} {port}"),
    ("ncat", "echo hi | ncat -w 2 {host} {port}"),
    ("socat", "echo hi | socat - TCP:{host}:{port}"),
    ("telnet", "echo hi | telnet {host} {port}"),
    ("unshare -n", "unshare -rn sh -c 'echo hi > /dev/tcp/{host}/{port}'"),
    ("nsenter net", "nsenter -t 1 -n bash -c 'echo hi > /dev/tcp/{host}/{port}'"),
    ("ip link up", "ip link set lo up; ip link; bash -c 'echo hi > /dev/tcp/{host}/{port}'"),
    ("env proxy", "http_proxy=http://{host}:{port} curl -s -m 2 http://example.invalid/"),
    ("ssh", "ssh -o ConnectTimeout=2 -p {port} {host} true"),
)

#: Promise 3, over the filesystem: a Unix socket the host listens on.
UNIX_SOCKETS: tuple[Form, ...] = (
    (
        "python unix socket",
        "{python} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{socket}')\"",
    ),
    ("curl unix socket", "curl -s -m 2 --unix-socket {socket} http://x/"),
    (
        "perl unix socket",
        "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => \"{socket}\") or die'",
    ),
)

#: Promise 3, abstract Unix sockets (``{abstract}``, a name without its leading NUL).
ABSTRACT_SOCKETS: tuple[Form, ...] = (
    (
        "python abstract socket",
        '{python} -c "import socket; s = socket.socket(socket.AF_UNIX); '
        "s.connect('\\0{abstract}')\"",
    ),
    ("curl abstract socket", "curl -s -m 2 --abstract-unix-socket {abstract} http://x/"),
)

#: Promise 4: forms that leave something running and let the call complete.
LEFT_BEHIND: tuple[Form, ...] = (
    ("background", "sleep 1000.{tag} &"),
    ("setsid", "setsid sleep 1000.{tag} > /dev/null 2>&1 &"),
    ("setsid -f", "setsid -f sleep 1000.{tag} > /dev/null 2>&1"),
    ("double fork", "( (sleep 1000.{tag} &) & )"),
    ("nohup", "nohup sleep 1000.{tag} > /dev/null 2>&1 &"),
    ("disown", "sleep 1000.{tag} & disown"),
    ("disown -a", "sleep 1000.{tag} & disown -a; exit 0"),
    ("exec -a", "(exec -a marker-{tag} sleep 1000 &)"),
    ("trap TERM", "(trap '' TERM HUP; exec sleep 1000.{tag}) &"),
    (
        "trap in setsid",
        "setsid sh -c \"trap '' TERM HUP INT; sleep 1000.{tag}\" > /dev/null 2>&1 &",
    ),
    ("kill parent", "sh -c 'sleep 1000.{tag} & kill -9 $PPID' ; true"),
    ("kill -9 PPID", "(sleep 1000.{tag} &); kill -9 $PPID"),
    ("kill -STOP PPID", "(sleep 1000.{tag} &); kill -STOP $PPID; true"),
    ("kill -9 1", "(sleep 1000.{tag} &); kill -9 1"),
    ("kill -STOP 1", "(sleep 1000.{tag} &); kill -STOP 1; true"),
    ("kill self", "(sleep 1000.{tag} &); kill -9 $$"),
    (
        "python fork",
        "{python} -c \"import os, sys; os.fork() or os.execvp('sleep', ['sleep', '1000.{tag}'])\"",
    ),
    (
        "python daemon",
        '{python} -c "import os; os.fork() and os._exit(0); os.setsid(); '
        "os.fork() and os._exit(0); os.execvp('sleep', ['sleep', '1000.{tag}'])\"",
    ),
    ("perl fork", 'perl -e \'fork or exec "sleep", "1000.{tag}"\''),
    ("at-exit trap", "trap 'sleep 1000.{tag} &' EXIT"),
    ("stdout closed", "sleep 1000.{tag} >&- 2>&- &"),
    ("coproc", "coproc sleep 1000.{tag}"),
    ("unshare fork", "unshare -rfp sleep 1000.{tag} &"),
    ("script child", "script -qc 'sleep 1000.{tag}' /dev/null > /dev/null 2>&1 &"),
    ("xargs child", "echo 1000.{tag} | xargs -P1 sleep &"),
)

#: Promise 4: forms that keep the call running, for its timeout or its cancellation.
HELD: tuple[Form, ...] = (
    ("foreground", "sleep 1000.{tag}"),
    ("trap TERM foreground", "trap '' TERM INT HUP; sleep 1000.{tag}; sleep 1000.{tag}"),
    ("setsid and wait", "setsid sleep 1000.{tag} & wait"),
    ("exec -a foreground", "exec -a marker-{tag} sleep 1000"),
    ("child ignores TERM", "sh -c \"trap '' TERM; sleep 1000.{tag}\""),
    ("stopped parent", "(sleep 1000.{tag} &); kill -STOP $$"),
    ("busy loop", "sleep 1000.{tag} & while :; do :; done"),
    (
        "python ignores TERM",
        '{python} -c "import signal, os; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
        "os.system('sleep 1000.{tag}')\"",
    ),
)

#: Promise 4: forms aimed at a process outside the sandbox (``{pid}``).
SIGNALS: tuple[Form, ...] = (
    ("kill -9", "kill -9 {pid}"),
    ("kill -STOP", "kill -STOP {pid}"),
    ("kill process group", "kill -9 -- -{pid}"),
    ("kill -1 everything", "kill -9 -1"),
    ("pkill sleep", "pkill -STOP sleep"),
    ("killall", "killall -9 sleep"),
    ("environ", "cat /proc/{pid}/environ"),
    ("cmdline and status", "cat /proc/{pid}/cmdline /proc/{pid}/status"),
    ("strace -p", "timeout 3 strace -p {pid}"),
    ("gdb -p", "timeout 5 gdb -batch -p {pid} -ex 'call (int)raise(19)'"),
    ("python kill", '{python} -c "import os; os.kill({pid}, 9)"'),
    (
        "python ptrace",
        '{python} -c "import ctypes; print(ctypes.CDLL(None).ptrace(16, {pid}, 0, 0))"',
    ),
    ("ps eww", "ps eww {pid}; ps axeww"),
    ("nsenter pid", "nsenter -t {pid} -a kill -STOP {pid}"),
    ("proc mem", "{python} -c \"open('/proc/{pid}/mem', 'rb')\""),
)

#: Promise 5: the host's secrets in its environment never reach the command.
ENVIRONMENT: tuple[Form, ...] = (
    ("env", "env"),
    ("printenv", "printenv"),
    ("set", "set"),
    ("declare -p", "declare -p"),
    ("export -p", "export -p"),
    ("proc self environ", "cat /proc/self/environ"),
    ("proc 1 environ", "cat /proc/1/environ"),
    ("proc PPID environ", "cat /proc/$PPID/environ"),
    ("proc every environ", "cat /proc/[0-9]*/environ"),
    ("python os.environ", '{python} -c "import os; print(dict(os.environ))"'),
    ("ps eww", "ps eww"),
    ("ps axeww", "ps axeww"),
    ("perl ENV", "perl -e 'print \"$_=$ENV{$_}\\n\" for keys %ENV'"),
    ("named variables", "echo $PEGBOARD_CANARY_TOKEN $AWS_SECRET_ACCESS_KEY $GITHUB_TOKEN"),
    ("indirect expansion", "for v in ${!PEGBOARD*} ${!AWS*} ${!GITHUB*}; do echo ${!v}; done"),
    ("compgen -v", 'for v in $(compgen -v); do echo "${!v}"; done'),
    ("login shell", "bash -lc env"),
    ("sudo -E", "sudo -E env"),
    ("proc self auxv strings", "strings /proc/self/environ /proc/1/environ"),
    ("parent cmdline", "cat /proc/$PPID/cmdline /proc/1/cmdline | tr '\\0' ' '"),
)
