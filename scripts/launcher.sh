#!/bin/sh
# Prints the launcher build.sh writes as dist/<name>: a file that is both a shell script and
# CommonJS. Executed (./dist/<name>), /bin/sh runs it and execs the project's Node
# (node_modules/.bin/node above the launcher's directory) on the bundle beside it, so the Node
# PATH finds first is never used; without that Node (a copied dist/), the first node on PATH runs
# the file as JavaScript. Run by a node (`node dist/<name>`), the sh lines are a string and
# comments, and it checks the Node version (when a minimum is given) and requires the bundle.
#   scripts/launcher.sh NAME BUNDLE [MIN_NODE_MAJOR]
set -eu
name=$1 bundle=$2 min=${3:-}
cat <<SH
#!/bin/sh
":" //; # $name: runs $bundle on the project's Node (node_modules/.bin/node), whatever node PATH finds.
":" //; d=\${0%/*}; [ "\$d" = "\$0" ] && d=.; [ -L "\$0" ] && d=\$(dirname "\$(readlink -f "\$0")")
":" //; [ -x "\$d/../node_modules/.bin/node" ] && exec "\$d/../node_modules/.bin/node" "\$d/$bundle" "\$@"
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
