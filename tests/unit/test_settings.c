/* squashd's settings (daemon/settings/settings.h, reload.h): parsing,
 * snapshots that stay valid while held, and what a reload applies and
 * what only a restart may change. No root needed (a file squashd would
 * refuse because root does not own it is checked when not root). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings/fs_types.h"
#include "settings/reload.h"
#include "settings/settings.h"
#include "unit.h"

static struct squashd_config *defaults(void)
{
	struct squashd_config *cfg = settings_new();
	config_defaults(cfg);
	return cfg;
}

static void settings_take_values_and_refuse_bad_ones_with_the_key(void)
{
	struct squashd_config *cfg = defaults();
	char err[512];

	CHECK_INT(cfg->request_timeout_s, 30);
	CHECK_INT(cfg->gc_interval_s, 60);
	CHECK_INT(config_set(cfg, "linger", "120", err, sizeof(err)), 0);
	CHECK_INT(cfg->linger_s, 120);
	CHECK_INT(config_set(cfg, "overlay_size", "2G", err, sizeof(err)), 0);
	CHECK(cfg->overlay_size == 2ULL << 30);
	/* No "no bound" for the registry's bytes: 0 would refuse every image. */
	CHECK_INT(config_set(cfg, "registry_bytes_per_user", "0", err, sizeof(err)), -1);
	CHECK(strstr(err, "registry_bytes_per_user must be a size from 64K to 1G") != NULL);
	CHECK_INT(config_set(cfg, "registry_bytes_per_user", "63K", err, sizeof(err)), -1);
	CHECK_INT(config_set(cfg, "registry_bytes_per_user", "64K", err, sizeof(err)), 0);
	CHECK(cfg->registry_bytes_per_user == 64ULL << 10);
	CHECK_INT(config_set(cfg, "linger", "3601", err, sizeof(err)), -1);
	CHECK_STR(err, "linger must be a number from 0 to 3600, not '3601'");
	CHECK_INT(config_set(cfg, "mount_mode", "loop", err, sizeof(err)), -1);
	CHECK_STR(err, "mount_mode must be auto, fuse or kernel, not 'loop'");
	CHECK_INT(config_set(cfg, "state_dir", "run/squashd", err, sizeof(err)), -1);
	CHECK_INT(config_set(cfg, "colour", "blue", err, sizeof(err)), -1);
	CHECK_STR(err, "unknown setting 'colour'");
	/* A template the readers expand as the user; empty (the default): off. */
	CHECK_STR(cfg->start_profile_cache, "");
	CHECK_INT(config_set(cfg, "start_profile_cache", "%h/.cache/slurm-squash/start-profiles", err,
			     sizeof(err)), 0);
	CHECK_STR(cfg->start_profile_cache, "%h/.cache/slurm-squash/start-profiles");
	CHECK_INT(config_set(cfg, "start_profile_cache", "%h/%j", err, sizeof(err)), -1);
	CHECK_INT(config_set(cfg, "start_profile_cache", "cache/%u", err, sizeof(err)), -1);
	CHECK_INT(config_set(cfg, "start_profile_cache", "", err, sizeof(err)), 0);
	CHECK_STR(cfg->start_profile_cache, "");
	settings_drop(cfg);
}

static void a_held_snapshot_outlives_the_publication_of_the_next(void)
{
	struct squashd_config *first = defaults(), *second = defaults();
	char err[512];

	CHECK(config_set(first, "allowed_targets", "/squash:/scratch/img", err, sizeof(err)) == 0);
	settings_publish(first);
	const struct squashd_config *held = settings_hold();
	CHECK(held == first);
	second->request_timeout_s = 99;
	settings_publish(second);
	/* The operation that holds the first still reads it, whole. */
	CHECK_INT(held->request_timeout_s, 30);
	CHECK_INT(held->allowed_targets.count, 2);
	CHECK_STR(held->allowed_targets.items[1], "/scratch/img");
	const struct squashd_config *now = settings_hold();
	CHECK_INT(now->request_timeout_s, 99);
	settings_drop(now);
	settings_drop(held); /* frees the first */
}

static void a_copy_owns_its_prefixes(void)
{
	struct squashd_config *cfg = defaults();
	char err[512];

	config_set(cfg, "trusted_prefixes", "/sw/images", err, sizeof(err));
	/* Exact targets: in allowed_targets only, kept by the copy. */
	CHECK_INT(config_set(cfg, "allowed_targets", "/squash:=/user-environment", err, sizeof(err)), 0);
	CHECK_INT(config_set(cfg, "trusted_prefixes", "=/sw/images", err, sizeof(err)), -1);
	CHECK_INT(config_set(cfg, "trusted_prefixes", "/sw/images", err, sizeof(err)), 0);
	struct squashd_config *copy = settings_copy(cfg);
	settings_drop(cfg);
	CHECK(copy != NULL);
	CHECK_INT(copy->trusted_prefixes.count, 1);
	CHECK(copy->allowed_targets.exact[1]);
	CHECK_STR(copy->allowed_targets.items[1], "/user-environment");
	CHECK_STR(copy->trusted_prefixes.items[0], "/sw/images");
	settings_drop(copy);
}

/* trusted_prefixes names where images are kept, which may be a system
 * directory; targets never may. */
static void images_may_be_kept_in_system_directories(void)
{
	struct squashd_config *cfg = defaults();
	char err[512];

	CHECK_INT(config_set(cfg, "trusted_prefixes", "/srv/images:/usr/share/images:/var/lib/images",
			     err, sizeof(err)), 0);
	CHECK_INT(cfg->trusted_prefixes.count, 3);
	CHECK_STR(cfg->trusted_prefixes.items[2], "/var/lib/images");
	CHECK_INT(config_set(cfg, "trusted_prefixes", "/", err, sizeof(err)), -1);
	CHECK(strstr(err, "trusted_prefixes: image directory '/' is every directory") != NULL);
	CHECK_INT(config_set(cfg, "trusted_prefixes", "/srv/../etc", err, sizeof(err)), -1);
	CHECK(strstr(err, "image directory '/srv/../etc' is not normalised") != NULL);
	CHECK_INT(config_set(cfg, "trusted_prefixes", "images", err, sizeof(err)), -1);
	CHECK(strstr(err, "is not an absolute path") != NULL);
	CHECK_INT(config_set(cfg, "allowed_targets", "/srv/images", err, sizeof(err)), -1);
	CHECK(strstr(err, "target prefix '/srv/images' is a system directory") != NULL);
	settings_drop(cfg);
}

static void text(struct conf_text *t, const char *const *pairs)
{
	for (size_t i = 0; pairs[i]; i += 2)
		conf_text_set(t, pairs[i], pairs[i + 1]);
}

static bool listed(const char *const *keys, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(keys[i], key))
			return true;
	return false;
}

static void a_reload_applies_run_time_settings_and_keeps_the_others(void)
{
	struct squashd_config *old = defaults(), *fresh = defaults();
	struct conf_text was = { 0 }, now = { 0 };
	struct reload_diff diff;
	char err[512];

	static const char *const before[] = { "linger", "10", "base_dir", "/squash", "debug", "yes", NULL };
	static const char *const after[] = { "linger", "20", "base_dir", "/mnt/squash",
					     "request_timeout", "45", NULL };
	text(&was, before);
	text(&now, after);
	config_set(old, "linger", "10", err, sizeof(err));
	config_set(old, "debug", "yes", err, sizeof(err));
	config_set(fresh, "linger", "20", err, sizeof(err));
	config_set(fresh, "base_dir", "/mnt/squash", err, sizeof(err));
	config_set(fresh, "request_timeout", "45", err, sizeof(err));

	struct squashd_config *next = reload_next(old, fresh, &was, &now, &diff);
	CHECK(next != NULL);
	CHECK_INT(next->linger_s, 20);
	CHECK_INT(next->request_timeout_s, 45);
	CHECK(!next->debug); /* removed from the file: back to its default */
	CHECK_STR(next->base_dir, "/squash"); /* a path: only a restart */
	CHECK_INT(diff.n_applied, 3);
	CHECK(listed(diff.applied, diff.n_applied, "linger"));
	CHECK(listed(diff.applied, diff.n_applied, "request_timeout"));
	CHECK(listed(diff.applied, diff.n_applied, "debug"));
	CHECK_INT(diff.n_restart, 1);
	CHECK(listed(diff.restart, diff.n_restart, "base_dir"));
	/* The snapshot in force is untouched. */
	CHECK_INT(old->linger_s, 10);
	settings_drop(next);
	settings_drop(old);
	settings_drop(fresh);
	conf_text_free(&was);
	conf_text_free(&now);
}

static void turning_gc_on_or_off_needs_a_restart(void)
{
	struct squashd_config *old = defaults(), *fresh = defaults();
	struct conf_text was = { 0 }, now = { 0 };
	struct reload_diff diff;
	char err[512];

	conf_text_set(&now, "gc_interval", "0");
	config_set(fresh, "gc_interval", "0", err, sizeof(err));
	struct squashd_config *next = reload_next(old, fresh, &was, &now, &diff);
	CHECK_INT(next->gc_interval_s, 60);
	CHECK_INT(diff.n_restart, 1);
	settings_drop(next);
	/* Between non-zero values it applies. */
	conf_text_set(&now, "gc_interval", "300");
	config_set(fresh, "gc_interval", "300", err, sizeof(err));
	next = reload_next(old, fresh, &was, &now, &diff);
	CHECK_INT(next->gc_interval_s, 300);
	CHECK_INT(diff.n_applied, 1);
	/* An unchanged file changes nothing. */
	settings_drop(next);
	next = reload_next(old, fresh, &now, &now, &diff);
	CHECK_INT(diff.n_applied + diff.n_restart, 0);
	settings_drop(next);
	settings_drop(old);
	settings_drop(fresh);
	conf_text_free(&was);
	conf_text_free(&now);
}

static void the_file_is_read_as_root_would_trust_it(void)
{
	char dir[] = "/tmp/test_settings.XXXXXX", path[256], err[1024];
	struct squashd_config *cfg = settings_new();

	if (!mkdtemp(dir))
		return;
	snprintf(path, sizeof(path), "%s/squashd.conf", dir);
	FILE *f = fopen(path, "w");
	fputs("# a comment\nlinger = 5   # trailing\n\nmax_loop_devices=8\n", f);
	fclose(f);
	int rc = config_load(path, true, cfg, err, sizeof(err));
	if (geteuid() == 0) {
		CHECK_INT(rc, 0);
		CHECK_INT(cfg->linger_s, 5);
		CHECK_INT(cfg->max_loop_devices, 8);
		struct conf_text t = { 0 };
		conf_text_read(path, &t);
		CHECK_STR(conf_text_get(&t, "linger"), "5");
		CHECK_STR(conf_text_get(&t, "max_loop_devices"), "8");
		conf_text_free(&t);
	} else {
		/* Anyone who could write it could choose the kernel mounts. */
		CHECK_INT(rc, -1);
		CHECK_CONTAINS(err, "refusing a configuration file that anyone but root can write");
	}
	f = fopen(path, "w");
	fputs("linger = 5\nnot a setting\n", f);
	fclose(f);
	config_free(cfg); /* config_load fills cfg afresh */
	if (geteuid() == 0) {
		CHECK_INT(config_load(path, true, cfg, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "squashd.conf:2: expected 'key = value'");
	}
	unlink(path);
	config_free(cfg);
	CHECK_INT(config_load(path, false, cfg, err, sizeof(err)), 0); /* missing: defaults */
	config_free(cfg);
	CHECK_INT(config_load(path, true, cfg, err, sizeof(err)), -1);
	rmdir(dir);
	settings_drop(cfg);
}

/* kernel_fs_types: names over the table; FUSE is never one of them. */
static void kernel_fs_types_name_superblock_types_and_never_fuse(void)
{
	struct squashd_config *cfg = defaults();
	char err[512], shown[256];
	const char *name;

	CHECK(fs_types_allows(cfg->kernel_fs_types, 0xEF53, &name));
	CHECK_STR(name, "ext4");
	CHECK(!fs_types_allows(cfg->kernel_fs_types, 0x65735546, &name)); /* FUSE */
	CHECK_STR(name, "fuse");
	CHECK(!fs_types_allows(cfg->kernel_fs_types, 0x794c7630, &name)); /* overlayfs */
	CHECK_INT(config_set(cfg, "kernel_fs_types", "lustre, gpfs", err, sizeof(err)), 0);
	fs_types_describe(cfg->kernel_fs_types, shown, sizeof(shown));
	CHECK_STR(shown, "lustre gpfs");
	CHECK(!fs_types_allows(cfg->kernel_fs_types, 0xEF53, &name));
	CHECK(fs_types_allows(cfg->kernel_fs_types, 0x0BD00BD0, &name));
	CHECK_INT(config_set(cfg, "kernel_fs_types", "ext4 fuse.sshfs", err, sizeof(err)), -1);
	CHECK(strstr(err, "never trusted") != NULL);
	CHECK_INT(config_set(cfg, "kernel_fs_types", "reiserfs", err, sizeof(err)), -1);
	CHECK(strstr(err, "'reiserfs'") != NULL);
	settings_drop(cfg);
}

int main(void)
{
	kernel_fs_types_name_superblock_types_and_never_fuse();
	settings_take_values_and_refuse_bad_ones_with_the_key();
	a_held_snapshot_outlives_the_publication_of_the_next();
	a_copy_owns_its_prefixes();
	images_may_be_kept_in_system_directories();
	a_reload_applies_run_time_settings_and_keeps_the_others();
	turning_gc_on_or_off_needs_a_restart();
	the_file_is_read_as_root_would_trust_it();
	return unit_exit_code();
}
