{
  "targets": [
    {
      "target_name": "inotify",
      "sources": ["inotify.c", "spawn.c", "asuser.c", "fsat.c", "fsat-born.c", "fsat-walk.c", "fsat-js.c"],
      "cflags": ["-Wall", "-Wextra", "-O3"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
