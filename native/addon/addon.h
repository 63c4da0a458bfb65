/* What the addon's parts share (init.c) and the registrations init.c calls. */
#ifndef ENVD_ADDON_H
#define ENVD_ADDON_H
#include <node_api.h>

/* Throws an Error coded with errno's name (EACCES...), its message naming `syscall`; returns NULL. */
napi_value addon_throw_errno(napi_env env, int err, const char *syscall);

/* Sets exports[name] to a new function calling `fn`. */
void addon_set_fn(napi_env env, napi_value exports, const char *name, napi_callback fn);

/* inotify (native/inotify/inotify.c). */
void register_inotify(napi_env env, napi_value exports);

/* trimMalloc, pipe, base64 (extras.c). */
void register_extras(napi_env env, napi_value exports);

#endif
