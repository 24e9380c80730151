/* A JSON text read into a tree, for the metadata of images made by other
 * tools (uenv's meta/env.json, image_meta_uenv.c): the user's bytes, so
 * the parse is bounded before anything is kept (SQUASH_JSON_MAX_BYTES,
 * SQUASH_JSON_MAX_DEPTH, SQUASH_JSON_MAX_NODES) and strict (RFC 8259: no
 * comments, no trailing commas, UTF-8 only). Strings are decoded to UTF-8;
 * one that holds a NUL (\u0000) is refused, so every string is a C string. */
#ifndef SQUASH_JSON_VALUE_H
#define SQUASH_JSON_VALUE_H

#include <stddef.h>

#define SQUASH_JSON_MAX_BYTES (1024 * 1024)
#define SQUASH_JSON_MAX_DEPTH 32 /* arrays and objects, one in another */
#define SQUASH_JSON_MAX_NODES 65536

enum squash_json_type {
	SQUASH_JSON_NULL,
	SQUASH_JSON_FALSE,
	SQUASH_JSON_TRUE,
	SQUASH_JSON_NUMBER, /* text: the number as written */
	SQUASH_JSON_STRING, /* text: decoded */
	SQUASH_JSON_ARRAY,
	SQUASH_JSON_OBJECT,
};

struct squash_json {
	enum squash_json_type type;
	char *text;                /* NUMBER and STRING */
	char *key;                 /* a member of an object: its name, decoded */
	struct squash_json *child; /* ARRAY and OBJECT: the first element */
	struct squash_json *next;  /* the next element of the parent */
};

/* Parses len bytes. Returns the tree (free with squash_json_free), or
 * NULL with err ("line L: ...") and errno EINVAL, or ENOMEM when out of
 * memory. */
struct squash_json *squash_json_parse(const char *text, size_t len, char *err, size_t errlen);
void squash_json_free(struct squash_json *v);

/* The member key of object v (the last one of that name, as most readers
 * take it), or NULL when v is not an object or has none. */
const struct squash_json *squash_json_member(const struct squash_json *v, const char *key);

#endif
