/* Process spawning without fork (spawn.c), registered on the addon's exports by native/addon/init.c. */
#ifndef ENVD_SPAWN_H
#define ENVD_SPAWN_H
#include <node_api.h>

void register_spawn(napi_env env, napi_value exports);

#endif
