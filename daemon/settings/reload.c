#include "config.h"
#include "settings/reload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "util/log.h"

#define LINE_MAX_LEN 8192

static struct {
	const char *path;
	bool must_exist, debug_forced;
	struct conf_text in_force;
} rl;

void conf_text_free(struct conf_text *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->key[i]);
		free(t->value[i]);
	}
	t->n = 0;
}

const char *conf_text_get(const struct conf_text *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->key[i], key))
			return t->value[i];
	return NULL;
}

void conf_text_set(struct conf_text *t, const char *key, const char *value)
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
	if (t->n < CONF_TEXT_MAX && value) {
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
void conf_text_read(const char *path, struct conf_text *t)
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
		conf_text_set(t, config_trim(line), config_trim(eq + 1));
	}
	fclose(f);
}

/* Takes key from fresh into next when it may change at run time. Returns
 * false when it needs a restart. */
static bool apply(const char *key, const struct squashd_config *fresh, struct squashd_config *next)
{
	if (!strcmp(key, "gc_interval")) {
		/* 0 means no timer thread; starting or stopping it is a restart. */
		if ((next->gc_interval_s == 0) != (fresh->gc_interval_s == 0))
			return false;
		next->gc_interval_s = fresh->gc_interval_s;
	} else if (!strcmp(key, "request_timeout")) {
		next->request_timeout_s = fresh->request_timeout_s;
	} else if (!strcmp(key, "max_requests_per_user")) {
		next->max_requests_per_user = fresh->max_requests_per_user;
	} else if (!strcmp(key, "max_queued_per_user")) {
		next->max_queued_per_user = fresh->max_queued_per_user;
	} else if (!strcmp(key, "max_fds_per_user")) {
		next->max_fds_per_user = fresh->max_fds_per_user;
	} else if (!strcmp(key, "max_images_per_job")) {
		next->max_images_per_job = fresh->max_images_per_job;
	} else if (!strcmp(key, "stopped_reader_timeout")) {
		/* Read at each round of the watch (core/stopped_readers.h). */
		next->stopped_reader_timeout_s = fresh->stopped_reader_timeout_s;
	} else if (!strcmp(key, "linger")) {
		/* Mounts lingering now keep their expiry; later releases use it. */
		next->linger_s = fresh->linger_s;
	} else if (!strcmp(key, "overlay_size")) {
		/* For overlays mounted from now on. */
		next->overlay_size = fresh->overlay_size;
	} else if (!strcmp(key, "registry_entries_per_user")) {
		/* Checked at each image; entries over a lowered budget stay. */
		next->registry_entries_per_user = fresh->registry_entries_per_user;
	} else if (!strcmp(key, "registry_bytes_per_user")) {
		next->registry_bytes_per_user = fresh->registry_bytes_per_user;
	} else if (!strcmp(key, "max_merged_mounts_per_user")) {
		/* Checked at each new merge; merges over a lowered budget stay. */
		next->max_merged_mounts_per_user = fresh->max_merged_mounts_per_user;
	} else if (!strcmp(key, "max_fuse_mounts_per_user")) {
		/* Checked at each new FUSE mount and bind; what is over stays. */
		next->max_fuse_mounts_per_user = fresh->max_fuse_mounts_per_user;
	} else if (!strcmp(key, "max_session_binds_per_user")) {
		/* Checked at each image; binds over a lowered budget stay. */
		next->max_session_binds_per_user = fresh->max_session_binds_per_user;
	} else if (!strcmp(key, "max_loop_devices")) {
		next->max_loop_devices = fresh->max_loop_devices;
	} else if (!strcmp(key, "max_loop_devices_per_user")) {
		/* For mounts made from then on; what a user holds stays. */
		next->max_loop_devices_per_user = fresh->max_loop_devices_per_user;
	} else if (!strcmp(key, "kernel_fs_types")) {
		/* Decided per image at its mount; existing mounts stay. */
		next->kernel_fs_types = fresh->kernel_fs_types;
	} else if (!strcmp(key, "fuse_union")) {
		/* For merges made from then on; existing mounts stay shared. */
		next->fuse_union = fresh->fuse_union;
	} else if (!strcmp(key, "reader_poll_us")) {
		/* For readers started from then on (main.c hands it over). */
		next->reader_poll_us = fresh->reader_poll_us;
	} else if (!strcmp(key, "start_profile_cache")) {
		/* For readers started from then on, as reader_poll_us. */
		memcpy(next->start_profile_cache, fresh->start_profile_cache,
		       sizeof(next->start_profile_cache));
	} else if (!strcmp(key, "union_trusted_images")) {
		next->union_trusted_images = fresh->union_trusted_images;
	} else if (!strcmp(key, "debug")) {
		next->debug = fresh->debug;
	} else {
		return false;
	}
	return true;
}

static void compare_key(const char *key, const struct conf_text *was, const struct conf_text *now,
			const struct squashd_config *fresh, struct squashd_config *next,
			struct reload_diff *diff)
{
	const char *before = conf_text_get(was, key), *after = conf_text_get(now, key);

	if ((!before && !after) || (before && after && !strcmp(before, after)))
		return;
	if (apply(key, fresh, next))
		diff->applied[diff->n_applied++] = key;
	else
		diff->restart[diff->n_restart++] = key;
}

struct squashd_config *reload_next(const struct squashd_config *old,
				   const struct squashd_config *fresh, const struct conf_text *was,
				   const struct conf_text *now, struct reload_diff *diff)
{
	struct squashd_config *next = settings_copy(old);

	memset(diff, 0, sizeof(*diff));
	if (!next)
		return NULL;
	/* Not squashd.conf's: fusermount's mount_max as /etc/fuse.conf says
	 * now, for each user's default share of it. */
	next->fusermount_mount_max = fresh->fusermount_mount_max;
	for (size_t i = 0; i < now->n; i++)
		compare_key(now->key[i], was, now, fresh, next, diff);
	/* Settings removed from the file go back to their defaults. */
	for (size_t i = 0; i < was->n; i++)
		if (!conf_text_get(now, was->key[i]))
			compare_key(was->key[i], was, now, fresh, next, diff);
	return next;
}

void reload_init(const char *path, bool must_exist, bool debug_forced)
{
	rl.path = path;
	rl.must_exist = must_exist;
	rl.debug_forced = debug_forced;
	conf_text_read(path, &rl.in_force);
}

/* The value of a known setting in cfg, for the log. */
static void value_in(const struct squashd_config *cfg, const char *key, char *buf, size_t len)
{
	static struct setting_text texts[SETTINGS_SHOWN_MAX]; /* only the main loop reloads */
	size_t n = settings_describe(cfg, texts, SETTINGS_SHOWN_MAX);

	snprintf(buf, len, "as at start");
	for (size_t i = 0; i < n; i++)
		if (!strcmp(texts[i].key, key))
			snprintf(buf, len, "'%s'", texts[i].value);
}

void reload_settings(void *arg)
{
	struct squashd_config *fresh = settings_new();
	struct conf_text now = { 0 };
	struct reload_diff diff;
	char err[PATH_MAX + 512], value[PATH_MAX * 2];

	(void)arg;
	sd_notify(0, "RELOADING=1\nSTATUS=reloading settings");
	if (!fresh || config_load(rl.path, rl.must_exist, fresh, err, sizeof(err)) < 0) {
		log_error("reload: %s; keeping the settings in force", fresh ? err : "out of memory");
		settings_drop(fresh);
		sd_notify(0, "READY=1\nSTATUS=serving (reload failed; see the log)");
		return;
	}
	conf_text_read(rl.path, &now);
	const struct squashd_config *old = settings_hold();
	struct squashd_config *next = reload_next(old, fresh, &rl.in_force, &now, &diff);
	if (!next) {
		log_error("reload: out of memory; keeping the settings in force");
	} else {
		for (size_t i = 0; i < diff.n_applied; i++) {
			value_in(next, diff.applied[i], value, sizeof(value));
			log_info("reload: %s is now %s", diff.applied[i], value);
		}
		for (size_t i = 0; i < diff.n_restart; i++) {
			value_in(next, diff.restart[i], value, sizeof(value));
			log_warning("reload: %s changed in %s but takes effect only when squashd restarts; "
				    "still %s", diff.restart[i], rl.path, value);
		}
		/* The text in force follows what was applied (keys may point into
		 * rl.in_force: copy them first). */
		struct conf_text applied = { 0 };
		for (size_t i = 0; i < diff.n_applied; i++)
			conf_text_set(&applied, diff.applied[i], "");
		for (size_t i = 0; i < applied.n; i++)
			conf_text_set(&rl.in_force, applied.key[i], conf_text_get(&now, applied.key[i]));
		conf_text_free(&applied);
		log_set_debug(rl.debug_forced || next->debug);
		settings_publish(next);
		log_info("reload: %s read; %zu setting(s) applied, %zu need a restart", rl.path,
			 diff.n_applied, diff.n_restart);
	}
	settings_drop(old);
	conf_text_free(&now);
	settings_drop(fresh);
	sd_notify(0, "READY=1\nSTATUS=serving");
}
