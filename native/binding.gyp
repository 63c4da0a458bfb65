{
  "targets": [
    {
      "target_name": "inotify",
      "sources": [
        "addon/init.c", "addon/extras.c",
        "inotify/inotify.c",
        "spawn/spawn.c", "spawn/plan.c",
        "fs/asuser.c", "fs/fsat.c", "fs/fsat-born.c", "fs/fsat-walk.c", "fs/fsat-js.c"
      ],
      "include_dirs": ["addon", "spawn", "fs"],
      "cflags": ["-Wall", "-Wextra", "-O3"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
