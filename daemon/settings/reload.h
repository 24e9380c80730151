/* SIGHUP (systemctl reload): re-reads squashd.conf and publishes a new
 * settings snapshot (settings.h) with the settings that can change under
 * running requests (apply() in reload.c says which; squashd.conf(5),
 * RELOADING, lists them, checked by tests/tools/test_settings_docs.py).
 * Every other changed setting (paths, prefixes, modes, MUNGE, Slurm) is
 * logged as needing a restart and stays as it was.
 * A file that does not load changes nothing. Operations in progress keep
 * the snapshot they hold; the next ones get the new one. */
#ifndef SQUASHD_RELOAD_H
#define SQUASHD_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "settings/settings.h"

/* The file's "key = value" lines as text (the last of a repeated key),
 * for change detection: a setting changed when its text did. */
#define CONF_TEXT_MAX 128
struct conf_text {
	size_t n;
	char *key[CONF_TEXT_MAX];
	char *value[CONF_TEXT_MAX];
};
void conf_text_read(const char *path, struct conf_text *t);
const char *conf_text_get(const struct conf_text *t, const char *key);
/* value NULL: the key is absent. */
void conf_text_set(struct conf_text *t, const char *key, const char *value);
void conf_text_free(struct conf_text *t);

/* What a reload changes. The keys point into the conf_texts given. */
struct reload_diff {
	size_t n_applied, n_restart;
	const char *applied[2 * CONF_TEXT_MAX]; /* taken from the file */
	const char *restart[2 * CONF_TEXT_MAX]; /* changed, but only a restart applies them */
};

/* The snapshot a reload publishes: old, with every reloadable setting
 * whose text differs between was (the text in force) and now (the file's
 * text) taken from fresh (the file, loaded). Unpublished; NULL when out
 * of memory. */
struct squashd_config *reload_next(const struct squashd_config *old,
				   const struct squashd_config *fresh, const struct conf_text *was,
				   const struct conf_text *now, struct reload_diff *diff);

/* Remembers the file's text as loaded at start (what is in force). */
void reload_init(const char *path, bool must_exist, bool debug_forced);

/* The SIGHUP handler (server_on_reload); arg is unused. */
void reload_settings(void *arg);

#endif
