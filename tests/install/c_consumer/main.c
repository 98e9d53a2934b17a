/* A C program using the installed opcache exactly as a C compiler driver
 * would: only <opcache/opcache.h>, linked through pkg-config.
 *
 * Usage: c_consumer WORK_DIR
 * Writes WORK_DIR/in/{kernel.o,kernel.json}, stores them in WORK_DIR/cache,
 * reads them back into WORK_DIR/out and compares the bytes. Prints
 * "c_consumer: ok" and exits 0, or prints what failed and exits 1. */
#include <opcache/opcache.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PATH_BUFFER 4096

static const char k_descriptor[] =
    "{\"op_type\":\"Square\",\"inputs\":[{\"shape\":[16],\"dtype\":\"float16\",\"format\":\"ND\"}],"
    "\"outputs\":[{\"shape\":[16],\"dtype\":\"float16\",\"format\":\"ND\"}],\"attrs\":{}}";
static const char k_scenario[] = "device=single,phase=infer,toolchain=8.0.RC2,soc=Ascend910B1";
/* A fake object: an ELF magic, a NUL and bytes of every value. */
static unsigned char k_object[300];
static const char k_metadata[] = "{\"binFileName\":\"kernel\",\"binFileSuffix\":\".o\",\"blockDim\":1}";

static int failures = 0;

static void fail(const char* what, opcache_status status) {
  fprintf(stderr, "c_consumer: FAILED: %s: status %d (%s): %s\n", what, (int)status, opcache_status_name(status),
          opcache_last_error());
  ++failures;
}

/* dir + "/" + name into out; 0 (after saying so) if it does not fit. */
static int join_path(char* out, size_t size, const char* dir, const char* name) {
  int n = snprintf(out, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size) {
    fprintf(stderr, "c_consumer: FAILED: path %s/%s is too long\n", dir, name);
    return 0;
  }
  return 1;
}

static int make_dir(const char* path) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "c_consumer: FAILED: mkdir %s: %s\n", path, strerror(errno));
    return 0;
  }
  return 1;
}

static int write_bytes(const char* path, const void* data, size_t size) {
  FILE* file = fopen(path, "wb");
  if (file == NULL) {
    fprintf(stderr, "c_consumer: FAILED: cannot create %s: %s\n", path, strerror(errno));
    return 0;
  }
  size_t written = fwrite(data, 1, size, file);
  int closed = fclose(file);
  if (written != size || closed != 0) {
    fprintf(stderr, "c_consumer: FAILED: cannot write %s\n", path);
    return 0;
  }
  return 1;
}

/* 1 when the file at path holds exactly `size` bytes equal to `data`. */
static int same_bytes(const char* path, const void* data, size_t size) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    fprintf(stderr, "c_consumer: FAILED: cannot open %s: %s\n", path, strerror(errno));
    return 0;
  }
  unsigned char* buffer = malloc(size + 1);
  size_t got = buffer ? fread(buffer, 1, size + 1, file) : 0;
  fclose(file);
  int same = buffer != NULL && got == size && memcmp(buffer, data, size) == 0;
  free(buffer);
  if (!same) {
    fprintf(stderr, "c_consumer: FAILED: %s differs from what was stored (%zu bytes read, %zu expected)\n", path, got,
            size);
  }
  return same;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s WORK_DIR\n", argv[0]);
    return 1;
  }
  const char* work = argv[1];
  char in_dir[PATH_BUFFER], out_dir[PATH_BUFFER], cache_dir[PATH_BUFFER];
  char object_path[PATH_BUFFER], metadata_path[PATH_BUFFER], path[PATH_BUFFER];
  if (!join_path(in_dir, sizeof in_dir, work, "in") || !join_path(out_dir, sizeof out_dir, work, "out") ||
      !join_path(cache_dir, sizeof cache_dir, work, "cache") ||
      !join_path(object_path, sizeof object_path, in_dir, "kernel.o") ||
      !join_path(metadata_path, sizeof metadata_path, in_dir, "kernel.json")) {
    return 1;
  }

  memcpy(k_object, "\x7f" "ELF", 4);
  for (size_t i = 4; i < sizeof k_object; ++i) {
    k_object[i] = (unsigned char)(i * 7);
  }
  if (!make_dir(work) || !make_dir(in_dir) || !write_bytes(object_path, k_object, sizeof k_object) ||
      !write_bytes(metadata_path, k_metadata, strlen(k_metadata))) {
    return 1;
  }
  printf("c_consumer: opcache %s, cache %s\n", opcache_version(), cache_dir);

  opcache_store* store = NULL;
  opcache_status status = opcache_open(cache_dir, &store);
  if (status != OPCACHE_OK || store == NULL) {
    fail("opcache_open", status);
    return 1;
  }

  const char* files[] = {object_path, metadata_path};
  char put_key[OPCACHE_KEY_BUFFER] = {0};
  status = opcache_put(store, k_descriptor, k_scenario, files, 2, 1234, put_key);
  if (status != OPCACHE_OK) {
    fail("opcache_put", status);
  } else if (strlen(put_key) != 64 || strspn(put_key, "0123456789abcdef") != 64) {
    fprintf(stderr, "c_consumer: FAILED: opcache_put returned key \"%s\", not 64 lowercase hex\n", put_key);
    ++failures;
  }

  char computed_key[OPCACHE_KEY_BUFFER] = {0};
  status = opcache_key(store, k_descriptor, k_scenario, computed_key);
  if (status != OPCACHE_OK) {
    fail("opcache_key", status);
  } else if (strcmp(computed_key, put_key) != 0) {
    fprintf(stderr, "c_consumer: FAILED: opcache_key gave %s but opcache_put stored %s\n", computed_key, put_key);
    ++failures;
  }

  status = opcache_has(store, put_key);
  if (status != OPCACHE_OK) {
    fail("opcache_has on the stored key", status);
  }
  const char* absent_key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  status = opcache_has(store, absent_key);
  if (status != OPCACHE_NOT_FOUND) {
    fail("opcache_has on an absent key (expected OPCACHE_NOT_FOUND)", status);
  }
  status = opcache_get(store, absent_key, out_dir);
  if (status != OPCACHE_NOT_FOUND) {
    fail("opcache_get on an absent key (expected OPCACHE_NOT_FOUND)", status);
  }

  status = opcache_get(store, put_key, out_dir);
  if (status != OPCACHE_OK) {
    fail("opcache_get on the stored key", status);
  } else {
    failures += !join_path(path, sizeof path, out_dir, "kernel.o") || !same_bytes(path, k_object, sizeof k_object);
    failures += !join_path(path, sizeof path, out_dir, "kernel.json") ||
                !same_bytes(path, k_metadata, strlen(k_metadata));
  }

  /* A descriptor without op_type is the caller's mistake: OPCACHE_USAGE with a message. */
  char bad_key[OPCACHE_KEY_BUFFER] = {0};
  status = opcache_put(store, "{\"inputs\":[]}", k_scenario, files, 2, 0, bad_key);
  if (status != OPCACHE_USAGE) {
    fail("opcache_put with a descriptor lacking op_type (expected OPCACHE_USAGE)", status);
  } else if (opcache_last_error()[0] == '\0') {
    fprintf(stderr, "c_consumer: FAILED: OPCACHE_USAGE without an opcache_last_error() message\n");
    ++failures;
  } else {
    printf("c_consumer: bad descriptor rejected: %s\n", opcache_last_error());
  }
  status = opcache_key(store, "not json", k_scenario, bad_key);
  if (status != OPCACHE_USAGE || opcache_last_error()[0] == '\0') {
    fail("opcache_key with invalid JSON (expected OPCACHE_USAGE and a message)", status);
  }

  /* The settings table, for bindings: a JSON array naming every setting. */
  char* schema = NULL;
  status = opcache_settings_schema_json(&schema);
  if (status != OPCACHE_OK) {
    fail("opcache_settings_schema_json", status);
  } else if (schema[0] != '[' || strstr(schema, "\"name\":\"mode\"") == NULL) {
    fprintf(stderr, "c_consumer: FAILED: opcache_settings_schema_json gave %.200s\n", schema);
    ++failures;
  }
  opcache_string_free(schema);

  opcache_close(store);
  if (failures != 0) {
    fprintf(stderr, "c_consumer: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_consumer: stored and read back %s\n", put_key);
  printf("c_consumer: ok\n");
  return 0;
}
