#include "config.h"
#include "settings/reload.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "util/log.h"
#include "core/status_report.h"

/* Settings lines remembered for change detection (more are not compared:
 * a file that long is not a squashd.conf). */
#define LINES_MAX 128
#define LINE_MAX_LEN 8192

struct conf_text {
	size_t n;
	char *key[LINES_MAX];
	char *value[LINES_MAX];
};

static struct {
	struct squashd_config *live;
	const char *path;
	bool must_exist, debug_forced;
	struct conf_text in_force;
} rl;

static void text_free(struct conf_text *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->key[i]);
		free(t->value[i]);
	}
	t->n = 0;
}

static const char *text_get(const struct conf_text *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->key[i], key))
			return t->value[i];
	return NULL;
}

static void text_set(struct conf_text *t, const char *key, const char *value)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->key[i], key)) {
			char *v = value ? strdup(value) : NULL;
			if (value && !v)
				return;
			free(t->value[i]);
			t->value[i] = v;
			return;
		}
	if (t->n < LINES_MAX && value) {
		t->key[t->n] = strdup(key);
		t->value[t->n] = strdup(value);
		if (t->key[t->n] && t->value[t->n])
			t->n++;
		else {
			free(t->key[t->n]);
			free(t->value[t->n]);
		}
	}
}

/* key = value pairs of the file (the last of a repeated key), without
 * checking them: config_load has done that. */
static void text_read(const char *path, struct conf_text *t)
{
	char line[LINE_MAX_LEN];
	FILE *f = fopen(path, "re");

	t->n = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		text_set(t, config_trim(line), config_trim(eq + 1));
	}
	fclose(f);
}

void reload_init(struct squashd_config *live, const char *path, bool must_exist, bool debug_forced)
{
	rl.live = live;
	rl.path = path;
	rl.must_exist = must_exist;
	rl.debug_forced = debug_forced;
	text_read(path, &rl.in_force);
}

/* Applies key from fresh when it may change at run time. Returns false
 * when it needs a restart. */
static bool apply(const char *key, const struct squashd_config *fresh)
{
	struct squashd_config *live = rl.live;

	if (!strcmp(key, "gc_interval")) {
		/* 0 means no timer thread; starting or stopping it is a restart. */
		if ((live->gc_interval_s == 0) != (fresh->gc_interval_s == 0))
			return false;
		__atomic_store_n(&live->gc_interval_s, fresh->gc_interval_s, __ATOMIC_RELAXED);
	} else if (!strcmp(key, "request_timeout")) {
		__atomic_store_n(&live->request_timeout_s, fresh->request_timeout_s, __ATOMIC_RELAXED);
	} else if (!strcmp(key, "max_images_per_job")) {
		__atomic_store_n(&live->max_images_per_job, fresh->max_images_per_job, __ATOMIC_RELAXED);
	} else if (!strcmp(key, "linger")) {
		/* Mounts lingering now keep their expiry; later releases use it. */
		__atomic_store_n(&live->linger_s, fresh->linger_s, __ATOMIC_RELAXED);
	} else if (!strcmp(key, "overlay_size")) {
		/* For overlays mounted from now on. */
		__atomic_store_n(&live->overlay_size, fresh->overlay_size, __ATOMIC_RELAXED);
	} else if (!strcmp(key, "max_loop_devices")) {
		__atomic_store_n(&live->max_loop_devices, fresh->max_loop_devices, __ATOMIC_RELAXED);
	} else if (!strcmp(key, "debug")) {
		__atomic_store_n(&live->debug, fresh->debug, __ATOMIC_RELAXED);
		log_set_debug(rl.debug_forced || fresh->debug);
	} else {
		return false;
	}
	return true;
}

/* The value in force of a known setting, for the log. */
static void value_in_force(const char *key, char *buf, size_t len)
{
	static struct setting_text texts[SETTINGS_SHOWN_MAX];
	size_t n = settings_describe(rl.live, texts, SETTINGS_SHOWN_MAX);

	snprintf(buf, len, "as at start");
	for (size_t i = 0; i < n; i++)
		if (!strcmp(texts[i].key, key))
			snprintf(buf, len, "'%s'", texts[i].value);
}

static void compare_key(const char *key, const struct conf_text *now, const struct squashd_config *fresh,
			unsigned *applied, unsigned *ignored)
{
	const char *was = text_get(&rl.in_force, key), *is = text_get(now, key);
	char value[PATH_MAX * 2];

	if ((!was && !is) || (was && is && !strcmp(was, is)))
		return;
	if (apply(key, fresh)) {
		value_in_force(key, value, sizeof(value));
		log_info("reload: %s is now %s", key, value);
		text_set(&rl.in_force, key, is);
		(*applied)++;
	} else {
		value_in_force(key, value, sizeof(value));
		log_warning("reload: %s changed in %s but takes effect only when squashd restarts; "
			    "still %s", key, rl.path, value);
		(*ignored)++;
	}
}

void reload_settings(void *arg)
{
	static struct squashd_config fresh;
	struct conf_text now = { 0 };
	char err[PATH_MAX + 512];
	unsigned applied = 0, ignored = 0;

	(void)arg;
	sd_notify(0, "RELOADING=1\nSTATUS=reloading settings");
	if (config_load(rl.path, rl.must_exist, &fresh, err, sizeof(err)) < 0) {
		log_error("reload: %s; keeping the settings in force", err);
		config_free(&fresh);
		sd_notify(0, "READY=1\nSTATUS=serving (reload failed; see the log)");
		return;
	}
	text_read(rl.path, &now);
	for (size_t i = 0; i < now.n; i++)
		compare_key(now.key[i], &now, &fresh, &applied, &ignored);
	/* Settings removed from the file go back to their defaults. */
	for (size_t i = 0; i < rl.in_force.n; i++)
		if (!text_get(&now, rl.in_force.key[i]))
			compare_key(rl.in_force.key[i], &now, &fresh, &applied, &ignored);
	log_info("reload: %s read; %u setting(s) applied, %u need a restart", rl.path, applied, ignored);
	text_free(&now);
	config_free(&fresh);
	sd_notify(0, "READY=1\nSTATUS=serving");
}
