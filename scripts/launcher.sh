#!/bin/sh
# Prints the launcher build.sh writes as dist/<name>: a file that is both a shell script and
# CommonJS. Executed (./dist/<name>), /bin/sh runs it and execs the project's Node
# (node_modules/.bin/node above the launcher's directory) on the bundle beside it, so the Node
# PATH finds first is never used; without that Node (a copied dist/), the first node on PATH runs
# the file as JavaScript. Run by a node (`node dist/<name>`), the sh lines are a string and
# comments, and it checks the Node version (when a minimum is given) and requires the bundle.
# sandboxd runs with its memory settings (src/sandboxd/host/memory-settings.ts: V8 flags and glibc's
# arena count, a value already in the environment kept); `--sandboxd-memory` prints them, flags on
# the first line and the variables on the second, for the release's launcher.
#   scripts/launcher.sh NAME BUNDLE [MIN_NODE_MAJOR]
#   scripts/launcher.sh --sandboxd-memory
set -eu
sandboxd_flags="--max-semi-space-size=2 --expose-gc"
sandboxd_env="MALLOC_ARENA_MAX=2"
if [ "${1:-}" = --sandboxd-memory ]; then
  printf '%s\n%s\n' "$sandboxd_flags" "$sandboxd_env"
  exit 0
fi
name=$1 bundle=$2 min=${3:-}
flags= env=
if [ "$name" = sandboxd ]; then
  flags="$sandboxd_flags "
  for kv in $sandboxd_env; do env="$env${kv%%=*}=\${${kv%%=*}:-${kv#*=}} "; done
fi
cat <<SH
#!/bin/sh
":" //; # $name: runs $bundle on the project's Node (node_modules/.bin/node), whatever node PATH finds.
":" //; d=\${0%/*}; [ "\$d" = "\$0" ] && d=.; [ -L "\$0" ] && d=\$(dirname "\$(readlink -f "\$0")")
":" //; [ -x "\$d/../node_modules/.bin/node" ] && ${env}exec "\$d/../node_modules/.bin/node" $flags"\$d/$bundle" "\$@"
":" //; exec node "\$d/$name" "\$@"
SH
if [ -n "$min" ]; then
  cat <<JS
if (Number(process.versions.node.split(".")[0]) < $min) {
  process.stderr.write("$name needs Node $min or later (node:sqlite); " + process.execPath + " is Node " + process.versions.node +
    ". Run it as ./dist/$name (it uses the project's node_modules/.bin/node, which npm ci installs).\\n");
  process.exit(1);
}
JS
fi
echo "require(\"./$bundle\");"
