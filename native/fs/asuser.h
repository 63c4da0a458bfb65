/* Filesystem calls made with a request user's credentials (asuser.c), registered by native/addon/init.c. */
#ifndef ENVD_ASUSER_H
#define ENVD_ASUSER_H
#include <node_api.h>

void register_asuser(napi_env env, napi_value exports);

#endif
