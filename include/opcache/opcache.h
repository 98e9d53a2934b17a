/* opcache — C ABI.
 *
 * A stable C interface over the same code as the C++ API (opcache.hpp), for
 * compilers written in C and for language bindings (the Python package uses
 * it through ctypes).
 *
 * Conventions:
 *  - Every function returns an opcache_status; OPCACHE_OK is 0.
 *  - On failure, opcache_last_error() returns a one-line message for the
 *    calling thread, valid until the next opcache call on that thread.
 *  - Strings are UTF-8 and NUL-terminated. Keys are 64 lowercase hex
 *    characters; buffers for them are OPCACHE_KEY_BUFFER bytes.
 *  - A handle may be used from several threads; several processes may open
 *    the same cache directory.
 */
#ifndef OPCACHE_OPCACHE_H
#define OPCACHE_OPCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes; values are stable and equal to the CLI's exit codes where
 * both exist (1 not found, 2 usage, 3 integrity, 4 remote). */
typedef enum opcache_status {
  OPCACHE_OK = 0,
  OPCACHE_NOT_FOUND = 1,    /* a miss, or a missing file */
  OPCACHE_USAGE = 2,        /* bad argument, JSON, scenario or configuration */
  OPCACHE_CORRUPT = 3,      /* integrity failure */
  OPCACHE_REMOTE = 4,       /* a remote failed */
  OPCACHE_IO = 5,           /* local file system or database failure */
  OPCACHE_TIMEOUT = 6,      /* a wait ran out of time */
  OPCACHE_BUILD_FAILED = 7, /* the build callback failed */
  OPCACHE_INTERNAL = 8,     /* a bug in opcache */
  OPCACHE_UNTRUSTED = 9     /* refused by the signature requirement (docs/security.md) */
} opcache_status;

/* Size of a buffer that holds a key and its terminating NUL. */
#define OPCACHE_KEY_BUFFER 65

/* An open store. Opaque; create with opcache_open, free with opcache_close. */
typedef struct opcache_store opcache_store;

/* The library version, "MAJOR.MINOR.PATCH". Never NULL. */
const char* opcache_version(void);

/* The name of a status ("ok", "not_found", ...). Never NULL. */
const char* opcache_status_name(opcache_status status);

/* The message of the last failure on this thread ("" if none). Never NULL. */
const char* opcache_last_error(void);

/* Opens the store at cache_dir (NULL or "": OPCACHE_DIR, XDG_CACHE_HOME,
 * ~/.cache/opcache). On success *out owns the handle. */
opcache_status opcache_open(const char* cache_dir, opcache_store** out);

/* Like opcache_open, with settings as a JSON object (NULL or "{}" for
 * defaults). The keys, all optional, are the settable rows of the settings
 * table (opcache_settings_schema_json): "cache_dir", "config_file", "mode"
 * ("enable"|"force"|"disable"), "min_idle_s", "op_debug_level",
 * "op_debug_list" (comma-separated), "volatile_fields", "wait_timeout_s",
 * "remotes" (array of strings), "no_remote" (boolean), "token_file",
 * "compression_level". Integers are JSON integers, flags JSON booleans, the
 * rest strings. Unknown keys and invalid values are OPCACHE_USAGE (the
 * message names the key; for unknown keys it lists the allowed ones).
 * Warnings go to stderr. */
opcache_status opcache_open_ex(const char* options_json, opcache_store** out);

/* Closes a handle; NULL is ignored. */
void opcache_close(opcache_store* store);

/* Computes the key of descriptor_json (a JSON object with "op_type") in
 * scenario, which is either JSON ({"device_mode":...}) or the CLI form
 * "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1". A toolchain or
 * soc that is omitted or "auto" is detected (the CANN install, npu-smi)
 * (docs/formats.md "Detected scenario fields"); a failed detection is OPCACHE_USAGE.
 * Writes 64 hex characters and a NUL to key_out (OPCACHE_KEY_BUFFER bytes). */
opcache_status opcache_key(opcache_store* store, const char* descriptor_json, const char* scenario,
                           char* key_out);

/* Stores file_count files (members keep their base names) under the key of
 * descriptor_json + scenario. build_ms is the build duration (0 if unknown).
 * key_out may be NULL. An already present key is kept and is OPCACHE_OK. */
opcache_status opcache_put(opcache_store* store, const char* descriptor_json, const char* scenario,
                           const char* const* files, size_t file_count, int64_t build_ms, char* key_out);

/* Writes the members of key into out_dir (created if needed), verified.
 * OPCACHE_NOT_FOUND on a miss. */
opcache_status opcache_get(opcache_store* store, const char* key, const char* out_dir);

/* OPCACHE_OK when key is present, OPCACHE_NOT_FOUND when not. */
opcache_status opcache_has(opcache_store* store, const char* key);

/* Removes key. OPCACHE_NOT_FOUND when it was not present. */
opcache_status opcache_remove(opcache_store* store, const char* key);

/* Totals and counters as a JSON object ({"entries","bundle_bytes","raw_bytes",
 * "pinned","counters":{...}}), in a string the caller frees with
 * opcache_string_free. */
opcache_status opcache_stats_json(opcache_store* store, char** json_out);

/* The settings table as a JSON array, one object per setting:
 * {"name","display","type","settable","flag","help","env","config_key","default"}
 * where "name" is the opcache_open_ex key, "type" one of "text", "path",
 * "integer", "comma_list", "repeated", "flag", and "settable" false for
 * settings only the environment and files set. The caller frees *json_out
 * with opcache_string_free. Needs no store; thread-safe. */
opcache_status opcache_settings_schema_json(char** json_out);

/* Frees a string returned by opcache; NULL is ignored. */
void opcache_string_free(char* text);

/* Where the files of opcache_get_or_build came from. */
typedef enum opcache_source {
  OPCACHE_SOURCE_HIT = 0,     /* read from the cache */
  OPCACHE_SOURCE_BUILT = 1,   /* built by this call and stored */
  OPCACHE_SOURCE_BYPASSED = 2 /* built without the cache (mode disable or debug bypass) */
} opcache_source;

/* A build callback: writes the kernel's files into work_dir (an empty
 * directory) and returns 0 on success, anything else on failure. */
typedef int (*opcache_build_fn)(const char* work_dir, void* user_data);

/* The transparent path: on a hit writes the kernel's files into out_dir; on a
 * miss calls build once across all processes sharing the store (the others
 * wait and then read its result), stores what it wrote, and moves the files
 * into out_dir. A failing build stores nothing: OPCACHE_BUILD_FAILED, for the
 * builder and for every process that waited for it. source_out may be NULL.
 * Mode (OPCACHE_MODE / config) and debug bypass apply; see opcache.hpp. */
opcache_status opcache_get_or_build(opcache_store* store, const char* descriptor_json, const char* scenario,
                                    const char* out_dir, opcache_build_fn build, void* user_data,
                                    opcache_source* source_out);

/* opcache_get_or_build, reporting what it did: on OPCACHE_OK,
 * *result_json_out is a JSON object {"key","source","files","build_ms","note"}
 * where "source" is "hit", "built" or "bypassed" and "files" lists the paths
 * of the kernel's files written into out_dir, sorted by file name (others'
 * files in out_dir are not listed). The caller frees it with opcache_string_free;
 * on failure it is NULL. Files are written in place: no staging directory. */
opcache_status opcache_get_or_build_json(opcache_store* store, const char* descriptor_json, const char* scenario,
                                         const char* out_dir, opcache_build_fn build, void* user_data,
                                         char** result_json_out);

/* opcache_get_or_build_json whose key also covers declared inputs: the
 * input_count paths of inputs, files and directories the build reads that
 * the descriptor does not describe (headers, a directory of templates). Their
 * content enters the key as `opcache exec --input`'s does (a file by its
 * SHA-256, a directory by the digests of the files below it; a path keyed as
 * given, below the base_dir setting as "{base}/..."), through the descriptor
 * member "declared_inputs": an edited declared file, or a file added,
 * removed or changed below a declared directory, is a miss. The report and
 * its ownership are opcache_get_or_build_json's; "key" is the key with the
 * inputs. inputs may be NULL when input_count is 0 (then exactly
 * opcache_get_or_build_json); a NULL entry is OPCACHE_USAGE. A missing input,
 * one that is neither a file nor a directory, and a descriptor that already
 * has a member "declared_inputs" (reserved) are OPCACHE_USAGE, before build
 * runs; an unreadable input is OPCACHE_IO. The strings are only read during
 * the call. */
opcache_status opcache_get_or_build_inputs_json(opcache_store* store, const char* descriptor_json,
                                                const char* scenario, const char* out_dir, const char* const* inputs,
                                                size_t input_count, opcache_build_fn build, void* user_data,
                                                char** result_json_out);

/* A scenario parsed and resolved once, for calls that take it instead of
 * scenario text (opcache_get_or_build_report), so that a caller making many
 * calls in one scenario does not have it parsed (and an explicit toolchain
 * checked against the CANN install) on every call. Opaque and immutable;
 * create with opcache_scenario_parse, free with opcache_scenario_free. One
 * handle may be used from several threads at once and with any store. */
typedef struct opcache_scenario opcache_scenario;

/* Bits of opcache_scenario_parse's *environment_out: what the resolved
 * scenario took from the environment at the time of the parse, so a caller
 * that keeps handles by scenario text knows which ones a later change of the
 * environment (a RANK_SIZE set, a CANN upgrade, another chip) would make
 * stale. 0: the text alone decides the scenario. */
#define OPCACHE_SCENARIO_FROM_ENVIRONMENT 1u /* device_mode from RANK_SIZE / LOCAL_WORLD_SIZE (no device given) */
#define OPCACHE_SCENARIO_DETECTED 2u         /* toolchain or soc omitted or "auto": detected (install, npu-smi) */

/* Parses and resolves scenario (either form, exactly as opcache_key: "auto"
 * and omitted fields are resolved now, from the environment of this call)
 * into a new handle. On success *out owns it; on failure *out is NULL and
 * the status and message are opcache_key's for the same text (OPCACHE_USAGE).
 * environment_out may be NULL; otherwise it receives the OPCACHE_SCENARIO_*
 * bits of what the resolution read from the environment. Thread-safe as long
 * as nobody calls setenv meanwhile. */
opcache_status opcache_scenario_parse(const char* scenario, opcache_scenario** out, unsigned* environment_out);

/* The resolved scenario as its canonical JSON (the bytes that are hashed into
 * keys), every field explicit: text that opcache_scenario_parse and the
 * functions taking scenario text resolve to the same scenario, whatever the
 * environment. The caller frees *json_out with opcache_string_free. */
opcache_status opcache_scenario_json(const opcache_scenario* scenario, char** json_out);

/* Frees a scenario handle; NULL is ignored. No call may be using it. */
void opcache_scenario_free(opcache_scenario* scenario);

/* What opcache_get_or_build_report did, without JSON. Filled by the library;
 * the caller owns the struct (its contents need no freeing). */
typedef struct opcache_build_report {
  char key[OPCACHE_KEY_BUFFER]; /* the key (with the declared inputs), 64 hex characters and a NUL */
  opcache_source source;        /* hit, built or bypassed */
  int64_t build_ms;             /* time the build callback took (0 on a hit) */
  size_t file_count;            /* how many paths `files` holds */
  /* The paths of the kernel's files written into out_dir, sorted by file name
   * (others' files in out_dir are not listed), each NUL-terminated, back to
   * back: files_size bytes, every NUL counted. */
  const char* files;
  size_t files_size;
  const char* note; /* e.g. why the cache was bypassed; "" when none. Never NULL on success */
} opcache_build_report;

/* opcache_get_or_build_inputs_json with a resolved scenario and the report in
 * *report_out instead of JSON: the same transparent path, declared inputs,
 * mode, debug bypass, single flight and statuses. inputs may be NULL when
 * input_count is 0 (no declared inputs: the key is opcache_key's). On
 * OPCACHE_OK *report_out is filled; on failure it is zeroed (files and note
 * NULL). report_out->files and ->note point into memory the library keeps for
 * the calling thread, valid until that thread's next call of
 * opcache_get_or_build_report (one made from inside the build callback of
 * another finishes before the outer one fills its report, so an outer report
 * is intact); copy them to keep them longer. The scenario handle is only read
 * and may be shared by threads. */
opcache_status opcache_get_or_build_report(opcache_store* store, const char* descriptor_json,
                                           const opcache_scenario* scenario, const char* out_dir,
                                           const char* const* inputs, size_t input_count, opcache_build_fn build,
                                           void* user_data, opcache_build_report* report_out);

#ifdef __cplusplus
}
#endif

#endif /* OPCACHE_OPCACHE_H */
