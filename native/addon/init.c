/*
 * envd's native addon (inotify.node): one module built from the folders of native/ (binding.gyp),
 * each registering its functions on the exports. Loaded once by src/envd/platform/native-addon.ts.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>
#include "addon.h"
#include "spawn.h"
#include "asuser.h"
#include "fsat.h"
#include <stdio.h>
#include <string.h>

napi_value addon_throw_errno(napi_env env, int err, const char *syscall) {
  char msg[256];
  napi_value code, message, error, num;
  snprintf(msg, sizeof msg, "%s: %s (%s)", syscall, strerror(err), uv_err_name(-err));
  napi_create_string_utf8(env, uv_err_name(-err), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_int32(env, -err, &num);
  napi_set_named_property(env, error, "errno", num);
  napi_throw(env, error);
  return NULL;
}

void addon_set_fn(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value value;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &value);
  napi_set_named_property(env, exports, name, value);
}

static napi_value init(napi_env env, napi_value exports) {
  register_inotify(env, exports);
  register_extras(env, exports);
  register_spawn(env, exports);
  register_asuser(env, exports);
  register_fsat(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
