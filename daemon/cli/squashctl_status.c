#include "config.h"
#include "cli/squashctl_report.h"

#include <string.h>

#include "client.h"
#include "cli/json_escape.h"

double latency_quantile(const Squash__NodeStatus *n, const Squash__RequestKindStats *ks, double q)
{
	uint64_t rank, seen = 0;

	if (!ks->requests)
		return -1;
	rank = (uint64_t)(q * (double)ks->requests + 0.999999);
	if (rank < 1)
		rank = 1;
	for (size_t b = 0; b < ks->n_bucket_counts; b++) {
		seen += ks->bucket_counts[b];
		if (seen >= rank)
			return b < n->n_latency_bounds_s ? n->latency_bounds_s[b] : -1;
	}
	return -1;
}

static void print_quantile(FILE *out, const Squash__NodeStatus *n, const Squash__RequestKindStats *ks,
			   const char *name, double q)
{
	double s = latency_quantile(n, ks, q);

	if (!ks->requests)
		fprintf(out, " %s -", name);
	else if (s < 0)
		fprintf(out, " %s >%gs", name, n->n_latency_bounds_s ? n->latency_bounds_s[n->n_latency_bounds_s - 1] : 0);
	else if (s < 1)
		fprintf(out, " %s <=%gms", name, s * 1000);
	else
		fprintf(out, " %s <=%gs", name, s);
}

void print_status(FILE *out, const Squash__NodeStatus *n)
{
	fprintf(out, "version: %s\n", n->version);
	/* squashd before 0.2.0 does not report these (both were 2 and 1). */
	if (n->has_protocol_version)
		fprintf(out, "protocol: %u\n", n->protocol_version);
	if (n->has_state_format)
		fprintf(out, "state file format: %u\n", n->state_format);
	fprintf(out, "uptime: %llu s\n", (unsigned long long)n->uptime_s);
	fprintf(out, "mounts: %u kernel, %u fuse, %u dead\n", n->mounts_kernel, n->mounts_fuse, n->mounts_dead);
	for (size_t i = 0; i < n->n_mount_groups; i++) {
		const Squash__MountGroup *g = n->mount_groups[i];
		if (g->count)
			fprintf(out, "  %s %s: %u\n", squash_mode_name(g->mode), g->state, g->count);
	}
	fprintf(out, "jobs: %u (%u failed)\n", n->jobs, n->jobs_failed);
	if (n->has_steps || n->has_sessions)
		fprintf(out, "steps with images of their own: %u\nsquash-shell sessions: %u\n", n->steps,
			n->sessions);
	if (n->has_fuse_servers)
		fprintf(out, "fuse servers: %u\n", n->fuse_servers);
	if (n->has_loop_devices)
		fprintf(out, "loop devices: %u\n", n->loop_devices);
	fprintf(out, "requests: %llu (%llu not ok), %u in progress\n", (unsigned long long)n->requests,
		(unsigned long long)n->requests_failed, n->requests_in_progress);
	for (size_t i = 0; i < n->n_request_kinds; i++) {
		const Squash__RequestKindStats *ks = n->request_kinds[i];
		if (!ks->requests)
			continue;
		fprintf(out, "  %-9s %llu (%llu not ok), answer time mean %.1fms", ks->kind,
			(unsigned long long)ks->requests, (unsigned long long)ks->failures,
			ks->answer_seconds_sum * 1000 / (double)ks->requests);
		print_quantile(out, n, ks, "p50", 0.50);
		print_quantile(out, n, ks, "p99", 0.99);
		fputc('\n', out);
	}
	fprintf(out, "gc releases: %llu\n", (unsigned long long)n->gc_releases);
	if (n->has_last_gc_age_s)
		fprintf(out, "last gc: %lld s ago\n", (long long)n->last_gc_age_s);
	else
		fprintf(out, "last gc: never\n");
	if (n->registry_unreadable)
		fprintf(out, "registry: not read at start: %s\n", n->registry_unreadable);
	if (n->registry_rebuilt)
		fprintf(out, "registry: rebuilt from the node at start: %s\n", n->registry_rebuilt);
	fprintf(out, "registry: %s", n->registry_error ? n->registry_error : "saved");
	if (n->has_registry_save_errors)
		fprintf(out, " (%llu failed saves since start)", (unsigned long long)n->registry_save_errors);
	fputc('\n', out);
	if (n->n_settings)
		fprintf(out, "settings in force:\n");
	for (size_t i = 0; i < n->n_settings; i++)
		fprintf(out, "  %s = %s\n", n->settings[i]->key, n->settings[i]->value);
	print_user_budgets(out, n);
	for (size_t i = 0; i < n->n_problems; i++)
		fprintf(out, "problem: %s\n", n->problems[i]);
}

static void json_uint(FILE *out, const char *key, unsigned long long v)
{
	fprintf(out, ",\"%s\":%llu", key, v);
}

void print_status_json(FILE *out, const Squash__NodeStatus *n)
{
	fprintf(out, "{\"version\":");
	json_write_string(out, n->version);
	fprintf(out, ",\"squashctl_version\":");
	json_write_string(out, PACKAGE_VERSION);
	if (n->has_protocol_version)
		json_uint(out, "protocol_version", n->protocol_version);
	if (n->has_state_format)
		json_uint(out, "state_format", n->state_format);
	json_uint(out, "uptime_s", n->uptime_s);
	fprintf(out, ",\"mounts\":{\"kernel\":%u,\"fuse\":%u,\"dead\":%u,\"lingering\":%u,\"by_state\":[",
		n->mounts_kernel, n->mounts_fuse, n->mounts_dead, n->mounts_lingering);
	for (size_t i = 0; i < n->n_mount_groups; i++) {
		const Squash__MountGroup *g = n->mount_groups[i];
		fprintf(out, "%s{\"mode\":", i ? "," : "");
		json_write_string(out, squash_mode_name(g->mode));
		fprintf(out, ",\"state\":");
		json_write_string(out, g->state);
		fprintf(out, ",\"count\":%u}", g->count);
	}
	fprintf(out, "]}");
	json_uint(out, "jobs", n->jobs);
	json_uint(out, "jobs_failed", n->jobs_failed);
	json_uint(out, "steps", n->steps);
	json_uint(out, "sessions", n->sessions);
	if (n->has_fuse_servers)
		json_uint(out, "fuse_servers", n->fuse_servers);
	if (n->has_loop_devices)
		json_uint(out, "loop_devices", n->loop_devices);
	json_uint(out, "requests", n->requests);
	json_uint(out, "requests_failed", n->requests_failed);
	json_uint(out, "requests_in_progress", n->requests_in_progress);
	json_uint(out, "gc_releases", n->gc_releases);
	if (n->has_last_gc_age_s)
		fprintf(out, ",\"last_gc_age_s\":%lld", (long long)n->last_gc_age_s);
	fprintf(out, ",\"registry\":{\"saved\":%s", n->registry_error ? "false" : "true");
	if (n->registry_error) {
		fprintf(out, ",\"error\":");
		json_write_string(out, n->registry_error);
	}
	if (n->registry_unreadable) {
		fprintf(out, ",\"unreadable\":");
		json_write_string(out, n->registry_unreadable);
	}
	if (n->registry_rebuilt) {
		fprintf(out, ",\"rebuilt\":");
		json_write_string(out, n->registry_rebuilt);
	}
	if (n->has_registry_save_errors)
		json_uint(out, "save_errors", n->registry_save_errors);
	fprintf(out, "},\"settings\":{");
	for (size_t i = 0; i < n->n_settings; i++) {
		fprintf(out, "%s", i ? "," : "");
		json_write_string(out, n->settings[i]->key);
		fputc(':', out);
		json_write_string(out, n->settings[i]->value);
	}
	fputc('}', out);
	print_user_budgets_json(out, n);
	fprintf(out, ",\"problems\":[");
	for (size_t i = 0; i < n->n_problems; i++) {
		fprintf(out, "%s", i ? "," : "");
		json_write_string(out, n->problems[i]);
	}
	fprintf(out, "]}\n");
}
