/* The settings as text (settings.h, settings_describe): for squashctl
 * status, the reload's log and tools/settings_defaults. */
#include "config.h"

#include "settings/settings.h"

#include <stdio.h>

#include "settings/fs_types.h"

static void join_prefixes(const struct squash_prefixes *p, char *buf, size_t len)
{
	squash_prefixes_format(p, buf, len);
}

size_t settings_describe(const struct squashd_config *cfg, struct setting_text *out, size_t cap)
{
	size_t n = 0;
#define SHOW(k, ...)                                                              \
	do {                                                                      \
		if (n < cap) {                                                    \
			out[n].key = k;                                           \
			snprintf(out[n].value, sizeof(out[n].value), __VA_ARGS__); \
			n++;                                                      \
		}                                                                 \
	} while (0)
	SHOW("socket", "%s", cfg->socket_path);
	SHOW("state_dir", "%s", cfg->state_dir);
	SHOW("base_dir", "%s", cfg->base_dir);
	if (n < cap) {
		out[n].key = "allowed_targets";
		join_prefixes(&cfg->allowed_targets, out[n].value, sizeof(out[n].value));
		n++;
	}
	if (n < cap) {
		out[n].key = "trusted_prefixes";
		join_prefixes(&cfg->trusted_prefixes, out[n].value, sizeof(out[n].value));
		n++;
	}
	SHOW("mount_mode", "%s", mount_policy_name(cfg->mount_policy));
	if (n < cap) {
		out[n].key = "kernel_fs_types";
		fs_types_describe(cfg->kernel_fs_types, out[n].value, sizeof(out[n].value));
		n++;
	}
	SHOW("require_munge", "%s", cfg->require_munge ? "yes" : "no");
	SHOW("munge_socket", "%s", cfg->munge_socket);
	SHOW("fuse_reader", "%s", cfg->use_squashfuse_ll ? "squashfuse_ll" : "squash-reader");
	SHOW("squash_reader", "%s", cfg->squash_reader);
	SHOW("squashfuse", "%s", cfg->squashfuse);
	SHOW("max_images_per_job", "%u", cfg->max_images_per_job);
	SHOW("max_loop_devices", "%u", cfg->max_loop_devices);
	SHOW("max_loop_devices_per_user", "%u", cfg->max_loop_devices_per_user);
	SHOW("request_timeout", "%u", cfg->request_timeout_s);
	SHOW("max_requests_per_user", "%u", cfg->max_requests_per_user);
	SHOW("max_queued_per_user", "%u", cfg->max_queued_per_user);
	SHOW("max_fds_per_user", "%u", cfg->max_fds_per_user);
	SHOW("gc_interval", "%u", cfg->gc_interval_s);
	SHOW("linger", "%u", cfg->linger_s);
	SHOW("stopped_reader_timeout", "%u", cfg->stopped_reader_timeout_s);
	SHOW("overlay_size", "%llu", cfg->overlay_size);
	SHOW("registry_entries_per_user", "%u", cfg->registry_entries_per_user);
	SHOW("registry_bytes_per_user", "%llu", cfg->registry_bytes_per_user);
	SHOW("max_session_binds_per_user", "%u", cfg->max_session_binds_per_user);
	SHOW("max_merged_mounts_per_user", "%u", cfg->max_merged_mounts_per_user);
	SHOW("max_fuse_mounts_per_user", "%u", cfg->max_fuse_mounts_per_user);
	SHOW("slurm_conf", "%s", cfg->slurm_conf);
	SHOW("node_name", "%s", cfg->node_name);
	SHOW("reader_cgroups", "%s", cfg->reader_cgroups ? "yes" : "no");
	SHOW("fuse_union", "%s", cfg->fuse_union ? "yes" : "no");
	SHOW("union_trusted_images", "%u", cfg->union_trusted_images);
	SHOW("reader_poll_us", "%u", cfg->reader_poll_us);
	SHOW("reader_tasks_max", "%u", cfg->reader_tasks_max);
	SHOW("reader_memory_max", "%llu", cfg->reader_memory_max);
	SHOW("reader_cpu_weight", "%u", cfg->reader_cpu_weight);
	SHOW("start_profile_cache", "%s", cfg->start_profile_cache);
	SHOW("debug", "%s", cfg->debug ? "yes" : "no");
#undef SHOW
	return n;
}
