/* An image's metadata, the file /.squash/meta inside it (squash-pack
 * writes it; format in docs/user.md, "Image metadata"): what the image is,
 * how it was made, its intended target and its named environments.
 *
 * The file is the user's bytes, read in tasks and by `squash-images
 * inspect`: parsed bounded (SQUASH_META_MAX_BYTES, lines of at most
 * SQUASH_META_MAX_LINE bytes, at most SQUASH_META_MAX_ENV_LINES env lines,
 * all checked before anything is copied), and anything that does not parse,
 * an unknown key included, is refused with a message naming the line. What
 * an environment may set is decided when it is applied (squash_image_env_ops). */
#ifndef SQUASH_IMAGE_META_H
#define SQUASH_IMAGE_META_H

#include <stdbool.h>
#include <stddef.h>

#define SQUASH_META_PATH ".squash/meta" /* relative to the image's root */
#define SQUASH_META_FORMAT 1
#define SQUASH_META_MAX_BYTES (64 * 1024)
#define SQUASH_META_MAX_LINE 4096 /* bytes, without the newline */
#define SQUASH_META_MAX_ENV_LINES 64
/* Operations one image's metadata may hold: env lines, or what a uenv
 * image's views do (image_meta_uenv.c), which come in more of them. */
#define SQUASH_META_MAX_ENV_OPS 512
#define SQUASH_META_NAME_MAX 64 /* ENVNAME, VAR, name, version */

enum squash_env_op_kind {
	SQUASH_ENV_SET,          /* VAR = value */
	SQUASH_ENV_SET_PATH,     /* VAR = MOUNT/path */
	SQUASH_ENV_PREPEND_PATH, /* VAR = MOUNT/path:$VAR (or MOUNT/path) */
	SQUASH_ENV_APPEND_PATH,  /* VAR = $VAR:MOUNT/path (or MOUNT/path) */
	SQUASH_ENV_UNSET,        /* VAR unset (uenv views only) */
	SQUASH_ENV_REFUSED,      /* the environment cannot be applied: value says why (uenv) */
	SQUASH_ENV_NOTHING,      /* the environment exists and changes nothing (an empty uenv view) */
};

/* One env line, as written (path ones: the relative path, normalised:
 * no "." or empty components; "" for the mount point itself). */
struct squash_env_line {
	char *env;
	enum squash_env_op_kind kind;
	char *var;
	char *value;
	bool absolute; /* a path one whose value is a path outside the image, as is (uenv) */
	unsigned line; /* in the file, for messages; 0: none (uenv's JSON) */
};

/* Fields the file does not give are NULL. */
struct squash_image_meta {
	char *name, *version, *description, *created, *created_by, *source, *packer, *target;
	char *default_env;
	struct squash_env_line env[SQUASH_META_MAX_ENV_OPS];
	size_t n_env;
	const char *file; /* the file it came from, in the image: SQUASH_META_PATH or SQUASH_UENV_META_PATH */
};

/* Parses len bytes of text. Returns 0, or -1 with err ("line N: ...";
 * out of memory said so) and meta left empty. */
int squash_image_meta_parse(const char *text, size_t len, struct squash_image_meta *meta,
			    char *err, size_t errlen);
void squash_image_meta_free(struct squash_image_meta *meta);

/* uenv's metadata (a uenv image's views as environments, the mount
 * point it was built for as its target; image_meta_uenv.c). */
#define SQUASH_UENV_META_PATH "meta/env.json"
#define SQUASH_UENV_META_MAX_BYTES (1024 * 1024)

/* Reads len bytes of uenv's meta/env.json into meta: its "mount" as
 * target, "name" and "description", and each view as an environment.
 * Returns 1; 0 with why in err when the text is not uenv's metadata (not
 * JSON, no "views" object: a file of that name in a data image is no
 * reason to fail its jobs); -1 when out of memory. A view that cannot be
 * applied as written (an unknown operation, a value of the wrong type, a
 * path with ':') becomes an environment refused, with why, if named. */
int squash_image_meta_from_uenv(const char *text, size_t len, struct squash_image_meta *meta,
				char *err, size_t errlen);

/* Reads and parses MOUNT/.squash/meta of an image seen at mount (an
 * absolute directory), else MOUNT/meta/env.json when the image has no
 * .squash (a uenv image), with the caller's rights, never through a
 * symbolic link (the files are the image's: the user's) and only from a
 * regular file of at most SQUASH_META_MAX_BYTES (uenv's:
 * SQUASH_UENV_META_MAX_BYTES). Returns 1 and meta, 0 when the image has
 * no metadata (or a meta/env.json that is not uenv's), or -1 with err. */
int squash_image_meta_load(const char *mount, struct squash_image_meta *meta, char *err,
			   size_t errlen);

/* Whether name is an environment of meta. */
bool squash_image_meta_has_env(const struct squash_image_meta *meta, const char *name);

/* Names and versions: [A-Za-z0-9._+-]{1,64}. */
bool squash_meta_label_valid(const char *s, size_t n);
/* Whether s (n bytes) has ".." as a path component. */
bool squash_meta_has_dotdot(const char *s, size_t n);
/* s (n bytes) without its empty and "." components, relative, malloc'd
 * ("" for none left); NULL when out of memory. */
char *squash_meta_path_normalised(const char *s, size_t n);
/* A target: an absolute path of at most 4095 bytes without a ".."
 * component, ':' or ','. */
bool squash_meta_target_valid(const char *s, size_t n);
/* Text a metadata value may hold: printable UTF-8 and tabs. */
bool squash_meta_text_printable(const char *s, size_t n);

/* VAR syntax: [A-Za-z_][A-Za-z0-9_]{0,63}. */
bool squash_env_name_valid(const char *name);
/* ENVNAME syntax: [A-Za-z_][A-Za-z0-9_.-]{0,63} (uenv's view names have '-'). */
bool squash_env_view_name_valid(const char *name);

/* Why an image may not set var, or NULL when it may. by_name: the user
 * named the environment (--squash-env); only then may it set loader
 * variables (LD_*). SLURM_*, SQUASH_* and SPANK_* are Slurm's and the
 * plugin's, never an image's. */
const char *squash_env_var_refusal(const char *var, bool by_name);

/* What applying an environment does to one variable. */
struct squash_env_op {
	enum squash_env_op_kind kind; /* SET for set and set-path; never REFUSED or NOTHING */
	const char *var;              /* points into the meta */
	char *value;                  /* the literal, or MOUNT/path; "" for UNSET */
};

struct squash_env_ops {
	struct squash_env_op op[SQUASH_META_MAX_ENV_OPS];
	size_t count;
};

/* The operations of environment env_name of meta for an image seen at
 * mount, in file order. Returns 0; -1 with err when meta has no such
 * environment or it sets a variable it may not (squash_env_var_refusal),
 * naming the line. */
int squash_image_env_ops(const struct squash_image_meta *meta, const char *env_name,
			 const char *mount, bool by_name, struct squash_env_ops *ops, char *err,
			 size_t errlen);
void squash_env_ops_free(struct squash_env_ops *ops);

/* The variable's new value after op (not UNSET), given its current one (NULL: unset),
 * malloc'd; NULL when out of memory. An empty current value counts as
 * unset (no stray ':' meaning the current directory in a search path). A
 * path already in the list is moved, not repeated, so that applying an
 * environment twice (a step inherits its batch script's) changes nothing.
 * MANPATH and INFOPATH keep an empty element ("DIR:" prepended, ":DIR"
 * appended) when they had no other entry: for man and info it stands for
 * the system's own list, which the image's directory alone would hide. */
char *squash_env_op_result(const struct squash_env_op *op, const char *current);

#endif
