#include "config.h"
#include "settings/settings.h"
#include "reader_wire.h"
#include "settings/fs_types.h"
#include "settings/fuse_conf.h"

#include <ctype.h>
#include <pthread.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imagespec.h"

#define CONFIG_LINE_MAX 8192

void config_defaults(struct squashd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->socket_path, sizeof(cfg->socket_path), "/run/squashd/squashd.sock");
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "/run/squashd");
	snprintf(cfg->base_dir, sizeof(cfg->base_dir), "%s", SQUASH_DEFAULT_BASE);
	snprintf(cfg->squashfuse, sizeof(cfg->squashfuse), "%s", SQUASHFUSE_LL_PATH);
	snprintf(cfg->squash_reader, sizeof(cfg->squash_reader), "%s", SQUASH_READER_PATH);
	cfg->mount_policy = MOUNT_POLICY_AUTO;
	cfg->kernel_fs_types = fs_types_default();
	cfg->require_munge = true;
	cfg->max_images_per_job = SQUASH_MAX_IMAGES;
	cfg->request_timeout_s = 30;
	cfg->max_requests_per_user = SQUASHD_MAX_REQUESTS_PER_USER_DEFAULT;
	cfg->max_queued_per_user = SQUASHD_MAX_QUEUED_PER_USER_DEFAULT;
	cfg->gc_interval_s = 60;
	cfg->overlay_size = SQUASHD_OVERLAY_DEFAULT;
	cfg->registry_entries_per_user = SQUASHD_REGISTRY_ENTRIES_DEFAULT;
	cfg->registry_bytes_per_user = SQUASHD_REGISTRY_BYTES_DEFAULT;
	cfg->max_session_binds_per_user = SQUASHD_SESSION_BINDS_DEFAULT;
	cfg->max_merged_mounts_per_user = SQUASHD_MERGED_MOUNTS_DEFAULT;
	cfg->fusermount_mount_max = fuse_conf_mount_max(FUSE_CONF_PATH);
	cfg->reader_cgroups = true;
	cfg->fuse_union = true;
	cfg->reader_tasks_max = SQUASHD_READER_TASKS_DEFAULT;
	cfg->reader_memory_max = SQUASHD_READER_MEMORY_DEFAULT;
	cfg->reader_cpu_weight = SQUASHD_READER_CPU_WEIGHT_DEFAULT;
	cfg->reader_poll_us = SERVE_POLL_US_DEFAULT;
	cfg->stopped_reader_timeout_s = SQUASHD_STOPPED_READER_TIMEOUT_DEFAULT;
}

const char *config_fuse_server(const struct squashd_config *cfg)
{
	return cfg->use_squashfuse_ll ? cfg->squashfuse : cfg->squash_reader;
}

const char *mount_policy_name(enum mount_policy p)
{
	switch (p) {
	case MOUNT_POLICY_AUTO: return "auto";
	case MOUNT_POLICY_FUSE: return "fuse";
	case MOUNT_POLICY_KERNEL: return "kernel";
	}
	return "?";
}

char *config_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

static int set_path(char *dst, size_t cap, const char *value, const char *key,
		    char *err, size_t errlen)
{
	if (value[0] != '/' || strlen(value) >= cap) {
		snprintf(err, errlen, "%s must be an absolute path shorter than %zu bytes", key, cap);
		return -1;
	}
	snprintf(dst, cap, "%s", value);
	return 0;
}

/* A template the reader expands as the user (profile_cache_path.h). */
static int set_template(char *dst, size_t cap, const char *value, const char *key, char *err,
			size_t errlen)
{
	if (*value && (strlen(value) >= cap || profile_cache_template_check(value) < 0)) {
		snprintf(err, errlen, "%s must be empty or an absolute path template (%%h, %%u, %%U, %%%%) "
			 "of at most %zu bytes, not '%s'", key, cap - 1, value);
		return -1;
	}
	snprintf(dst, cap, "%s", value);
	return 0;
}

static int set_bool(bool *dst, const char *value, const char *key, char *err, size_t errlen)
{
	if (!strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1"))
		*dst = true;
	else if (!strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "0"))
		*dst = false;
	else {
		snprintf(err, errlen, "%s must be yes or no, not '%s'", key, value);
		return -1;
	}
	return 0;
}

static int set_uint(unsigned *dst, const char *value, unsigned min, unsigned max,
		    const char *key, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(value, &end, 10);
	if (errno || end == value || *end || v < min || v > max) {
		snprintf(err, errlen, "%s must be a number from %u to %u, not '%s'", key, min, max, value);
		return -1;
	}
	*dst = (unsigned)v;
	return 0;
}

/* The settings that are a number in a range, each once. */
static const struct uint_setting {
	const char *key;
	size_t offset;
	unsigned min, max;
} uint_settings[] = {
	{ "gc_interval", offsetof(struct squashd_config, gc_interval_s), 0, 86400 },
	{ "linger", offsetof(struct squashd_config, linger_s), 0, SQUASHD_LINGER_MAX_S },
	{ "registry_entries_per_user", offsetof(struct squashd_config, registry_entries_per_user), 1, 1000000 },
	{ "max_merged_mounts_per_user", offsetof(struct squashd_config, max_merged_mounts_per_user), 0, 1000000 },
	{ "max_fuse_mounts_per_user", offsetof(struct squashd_config, max_fuse_mounts_per_user), 0, 1000000 },
	{ "max_session_binds_per_user", offsetof(struct squashd_config, max_session_binds_per_user), 0, 1000000 },
	{ "max_requests_per_user", offsetof(struct squashd_config, max_requests_per_user), 0, SQUASHD_MAX_REQUESTS_PER_USER_MAX },
	{ "max_queued_per_user", offsetof(struct squashd_config, max_queued_per_user), 0, SQUASHD_MAX_QUEUED_PER_USER_MAX },
	{ "max_fds_per_user", offsetof(struct squashd_config, max_fds_per_user), 0, 1u << 30 },
	{ "max_images_per_job", offsetof(struct squashd_config, max_images_per_job), 1, SQUASH_MAX_IMAGES },
	{ "max_loop_devices", offsetof(struct squashd_config, max_loop_devices), 0, 1u << 20 },
	{ "max_loop_devices_per_user", offsetof(struct squashd_config, max_loop_devices_per_user), 0, 1u << 20 },
	{ "request_timeout", offsetof(struct squashd_config, request_timeout_s), 1, 600 },
	{ "union_trusted_images", offsetof(struct squashd_config, union_trusted_images), 0, SQUASH_MAX_IMAGES },
	{ "reader_poll_us", offsetof(struct squashd_config, reader_poll_us), 0, SERVE_POLL_US_MAX },
	{ "reader_tasks_max", offsetof(struct squashd_config, reader_tasks_max), 0, 1u << 22 },
	{ "reader_cpu_weight", offsetof(struct squashd_config, reader_cpu_weight), 1, 10000 },
	{ "stopped_reader_timeout", offsetof(struct squashd_config, stopped_reader_timeout_s), 0,
	  SQUASHD_STOPPED_READER_TIMEOUT_MAX },
};

/* A size in bytes with an optional K, M, G or T suffix (powers of 1024),
 * from min (0, or whole KiB) to max (whole GiB). */
static int set_size(unsigned long long *dst, const char *value, unsigned long long min, unsigned long long max,
		    const char *key, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(value, &end, 10), unit = 1;
	const char *units = "KMGT";
	const char *u = *end && end != value ? strchr(units, toupper((unsigned char)*end)) : NULL;

	if (u) {
		for (const char *p = units; p <= u; p++)
			unit <<= 10;
		end++;
	}
	if (errno || end == value || *end || value[0] == '-' || v > max / unit || v * unit < min) {
		char low[32] = "0";

		if (min)
			snprintf(low, sizeof(low), "%lluK", min >> 10);
		snprintf(err, errlen, "%s must be a size from %s to %lluG (a number with an optional "
			 "K, M, G or T suffix), not '%s'", key, low, max >> 30, value);
		return -1;
	}
	*dst = v * unit;
	return 0;
}

static int set_prefixes(struct squash_prefixes *dst, const char *value,
			const char *key, char *err, size_t errlen)
{
	char why[512];
	squash_prefixes_free(dst);
	if (!*value)
		return 0;
	/* Only allowed_targets may name exact targets (=DIR); trusted_prefixes
	 * names where images are, which may be a system directory
	 * (/srv/images), not where they are mounted. */
	int rc = !strcmp(key, "allowed_targets") ? squash_allowed_targets_parse(value, dst, why, sizeof(why))
		 : !strcmp(key, "trusted_prefixes") ? squash_image_dirs_parse(value, dst, why, sizeof(why))
						    : squash_prefixes_parse(value, dst, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", key, why);
		return -1;
	}
	return 0;
}

int config_set(struct squashd_config *cfg, const char *key, const char *value, char *err,
	       size_t errlen)
{
	for (size_t i = 0; i < sizeof(uint_settings) / sizeof(uint_settings[0]); i++) {
		const struct uint_setting *u = &uint_settings[i];

		if (!strcmp(key, u->key))
			return set_uint((unsigned *)((char *)cfg + u->offset), value, u->min, u->max, key,
					err, errlen);
	}
	if (!strcmp(key, "socket"))
		return set_path(cfg->socket_path, sizeof(cfg->socket_path), value, key, err, errlen);
	if (!strcmp(key, "state_dir"))
		/* Mount points below it are named in answers (SQUASH_MOUNT_DIR_MAX). */
		return set_path(cfg->state_dir, SQUASH_MOUNT_DIR_MAX - 32, value, key, err, errlen);
	if (!strcmp(key, "slurm_conf")) {
		if (!*value) {
			cfg->slurm_conf[0] = '\0';
			return 0;
		}
		return set_path(cfg->slurm_conf, sizeof(cfg->slurm_conf), value, key, err, errlen);
	}
	if (!strcmp(key, "node_name")) {
		if (strlen(value) >= sizeof(cfg->node_name) || strpbrk(value, " \t/")) {
			snprintf(err, errlen, "node_name must be a Slurm node name, not '%s'", value);
			return -1;
		}
		snprintf(cfg->node_name, sizeof(cfg->node_name), "%s", value);
		return 0;
	}
	if (!strcmp(key, "overlay_size"))
		return set_size(&cfg->overlay_size, value, 0, SQUASHD_OVERLAY_MAX, key, err, errlen);
	if (!strcmp(key, "registry_bytes_per_user"))
		/* 0 would refuse every image, root's too: no bound is not on offer. */
		return set_size(&cfg->registry_bytes_per_user, value, SQUASHD_REGISTRY_BYTES_MIN, 1ULL << 30, key,
				err, errlen);
	if (!strcmp(key, "base_dir"))
		return set_path(cfg->base_dir, sizeof(cfg->base_dir), value, key, err, errlen);
	if (!strcmp(key, "squashfuse"))
		return set_path(cfg->squashfuse, sizeof(cfg->squashfuse), value, key, err, errlen);
	if (!strcmp(key, "squash_reader"))
		return set_path(cfg->squash_reader, sizeof(cfg->squash_reader), value, key, err, errlen);
	if (!strcmp(key, "fuse_reader")) {
		if (strcmp(value, "squash-reader") && strcmp(value, "squashfuse_ll")) {
			snprintf(err, errlen, "fuse_reader must be squash-reader or squashfuse_ll, not '%s'", value);
			return -1;
		}
		cfg->use_squashfuse_ll = !strcmp(value, "squashfuse_ll");
		return 0;
	}
	if (!strcmp(key, "munge_socket")) {
		if (!*value) {
			cfg->munge_socket[0] = '\0';
			return 0;
		}
		return set_path(cfg->munge_socket, sizeof(cfg->munge_socket), value, key, err, errlen);
	}
	if (!strcmp(key, "allowed_targets"))
		return set_prefixes(&cfg->allowed_targets, value, key, err, errlen);
	if (!strcmp(key, "trusted_prefixes"))
		return set_prefixes(&cfg->trusted_prefixes, value, key, err, errlen);
	if (!strcmp(key, "require_munge"))
		return set_bool(&cfg->require_munge, value, key, err, errlen);
	if (!strcmp(key, "debug"))
		return set_bool(&cfg->debug, value, key, err, errlen);
	if (!strcmp(key, "reader_cgroups"))
		return set_bool(&cfg->reader_cgroups, value, key, err, errlen);
	if (!strcmp(key, "fuse_union"))
		return set_bool(&cfg->fuse_union, value, key, err, errlen);
	if (!strcmp(key, "start_profile_cache"))
		return set_template(cfg->start_profile_cache, sizeof(cfg->start_profile_cache), value, key,
				    err, errlen);
	if (!strcmp(key, "reader_memory_max"))
		return set_size(&cfg->reader_memory_max, value, 0, 1ULL << 50, key, err, errlen);
	if (!strcmp(key, "kernel_fs_types"))
		return fs_types_parse(value, &cfg->kernel_fs_types, err, errlen);
	if (!strcmp(key, "mount_mode")) {
		if (!strcmp(value, "auto"))
			cfg->mount_policy = MOUNT_POLICY_AUTO;
		else if (!strcmp(value, "fuse"))
			cfg->mount_policy = MOUNT_POLICY_FUSE;
		else if (!strcmp(value, "kernel"))
			cfg->mount_policy = MOUNT_POLICY_KERNEL;
		else {
			snprintf(err, errlen, "mount_mode must be auto, fuse or kernel, not '%s'", value);
			return -1;
		}
		return 0;
	}
	snprintf(err, errlen, "unknown setting '%s'", key);
	return -1;
}

/* squashd acts on this file as root: anyone who could write it could choose
 * which images get kernel mounts, so only root may be able to change it. */
static int check_owner(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return -1;
	}
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(err, errlen,
			 "%s: refusing a configuration file that anyone but root can write "
			 "(owner uid %u, mode %04o; want owner root, not group/other writable)",
			 path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

static int finish_defaults(struct squashd_config *cfg, char *err, size_t errlen)
{
	if (cfg->allowed_targets.count == 0)
		return set_prefixes(&cfg->allowed_targets, cfg->base_dir, "base_dir", err, errlen);
	return 0;
}

int config_load(const char *path, bool must_exist, struct squashd_config *cfg,
		char *err, size_t errlen)
{
	config_defaults(cfg);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT && !must_exist)
			return finish_defaults(cfg, err, errlen);
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (check_owner(fd, path, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	char line[CONFIG_LINE_MAX];
	unsigned lineno = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%u: line too long", path, lineno);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = config_trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%u: expected 'key = value'", path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		char why[1024];
		if (config_set(cfg, config_trim(s), config_trim(eq + 1), why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
			rc = -1;
			break;
		}
	}
	fclose(f);
	if (rc == 0)
		rc = finish_defaults(cfg, err, errlen);
	return rc;
}

void config_free(struct squashd_config *cfg)
{
	squash_prefixes_free(&cfg->allowed_targets);
	squash_prefixes_free(&cfg->trusted_prefixes);
}

/* ---------------------------------------------------------------- snapshots */

struct snapshot {
	unsigned refs; /* holders, the publisher's reference included */
	struct squashd_config cfg;
};

static pthread_mutex_t in_force_lock = PTHREAD_MUTEX_INITIALIZER;
static struct snapshot *in_force;

static struct snapshot *snapshot_of(const struct squashd_config *cfg)
{
	return (struct snapshot *)((char *)cfg - offsetof(struct snapshot, cfg));
}

struct squashd_config *settings_new(void)
{
	struct snapshot *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->refs = 1;
	return &s->cfg;
}

struct squashd_config *settings_copy(const struct squashd_config *cfg)
{
	struct squashd_config *copy = settings_new();

	if (!copy)
		return NULL;
	*copy = *cfg;
	memset(&copy->allowed_targets, 0, sizeof(copy->allowed_targets));
	memset(&copy->trusted_prefixes, 0, sizeof(copy->trusted_prefixes));
	const struct squash_prefixes *from[] = { &cfg->allowed_targets, &cfg->trusted_prefixes };
	struct squash_prefixes *to[] = { &copy->allowed_targets, &copy->trusted_prefixes };
	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; i < from[l]->count; i++) {
			if (!(to[l]->items[i] = strdup(from[l]->items[i]))) {
				settings_drop(copy);
				return NULL;
			}
			to[l]->exact[i] = from[l]->exact[i];
			to[l]->count++;
		}
	}
	return copy;
}

void settings_publish(struct squashd_config *cfg)
{
	pthread_mutex_lock(&in_force_lock);
	struct snapshot *old = in_force;
	in_force = snapshot_of(cfg);
	pthread_mutex_unlock(&in_force_lock);
	if (old)
		settings_drop(&old->cfg);
}

const struct squashd_config *settings_hold(void)
{
	pthread_mutex_lock(&in_force_lock);
	struct snapshot *s = in_force;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&in_force_lock);
	return s ? &s->cfg : NULL;
}

void settings_drop(const struct squashd_config *cfg)
{
	if (!cfg)
		return;
	struct snapshot *s = snapshot_of(cfg);
	pthread_mutex_lock(&in_force_lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&in_force_lock);
	if (last) {
		config_free(&s->cfg);
		free(s);
	}
}
