#include "config.h"
#include "cli/squashctl_report.h"

#include <stdbool.h>

#include "client.h"

/* Label values: backslash, double quote and newline escaped (the text
 * exposition format's rules). */
static void label_value(FILE *out, const char *s)
{
	fputc('"', out);
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static void header(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(FILE *out, const char *name, const char *help, unsigned long long v)
{
	header(out, name, "gauge", help);
	fprintf(out, "%s %llu\n", name, v);
}

static void per_kind(FILE *out, const Squash__NodeStatus *n, const char *name, const char *help,
		     int failures)
{
	header(out, name, "counter", help);
	for (size_t i = 0; i < n->n_request_kinds; i++) {
		const Squash__RequestKindStats *ks = n->request_kinds[i];
		fprintf(out, "%s{kind=", name);
		label_value(out, ks->kind);
		fprintf(out, "} %llu\n", (unsigned long long)(failures ? ks->failures : ks->requests));
	}
}

static void histogram(FILE *out, const Squash__NodeStatus *n)
{
	const char *name = "squashd_request_duration_seconds";

	header(out, name, "histogram", "Time from receiving a request to sending its answer, by request kind.");
	for (size_t i = 0; i < n->n_request_kinds; i++) {
		const Squash__RequestKindStats *ks = n->request_kinds[i];
		uint64_t cumulative = 0;
		for (size_t b = 0; b < ks->n_bucket_counts; b++) {
			cumulative += ks->bucket_counts[b];
			fprintf(out, "%s_bucket{kind=", name);
			label_value(out, ks->kind);
			if (b < n->n_latency_bounds_s)
				fprintf(out, ",le=\"%g\"} %llu\n", n->latency_bounds_s[b],
					(unsigned long long)cumulative);
			else
				fprintf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)cumulative);
		}
		fprintf(out, "%s_sum{kind=", name);
		label_value(out, ks->kind);
		fprintf(out, "} %.6f\n%s_count{kind=", ks->answer_seconds_sum, name);
		label_value(out, ks->kind);
		fprintf(out, "} %llu\n", (unsigned long long)ks->requests);
	}
}

/* A budget's name as a label value: squashd's words ("requests
 * running") with '_' for the spaces, as Prometheus labels are written. */
static void budget_label(FILE *out, const char *name)
{
	char buf[96];
	size_t i;

	for (i = 0; name && name[i] && i + 1 < sizeof(buf); i++)
		buf[i] = name[i] == ' ' ? '_' : name[i];
	buf[i] = '\0';
	label_value(out, buf);
}

/* The per-user budgets (NodeStatus.user_budgets: each user squashd holds
 * something of), so that an alert can say which user nears which limit. */
static void user_budgets(FILE *out, const Squash__NodeStatus *n, bool limits)
{
	const char *name = limits ? "squashd_user_budget_limit" : "squashd_user_budget_used";

	header(out, name, "gauge",
	       limits ? "The limit of a per-user budget (none where it has no limit)."
		      : "What a user holds of a per-user budget (docs/security.md, \"Budgets per user\").");
	for (size_t i = 0; i < n->n_user_budgets; i++) {
		const Squash__UserBudget *b = n->user_budgets[i];

		if (limits && !b->has_limit)
			continue;
		fprintf(out, "%s{uid=\"%u\",budget=", name, b->uid);
		budget_label(out, b->budget);
		fprintf(out, "} %llu\n", (unsigned long long)(limits ? b->limit : b->used));
	}
}

void print_metrics(FILE *out, const Squash__NodeStatus *n)
{
	header(out, "squashd_build_info", "gauge",
	       "squashd's version, its protocol and state file format versions (always 1).");
	fprintf(out, "squashd_build_info{version=");
	label_value(out, n->version);
	if (n->has_protocol_version)
		fprintf(out, ",protocol=\"%u\"", n->protocol_version);
	if (n->has_state_format)
		fprintf(out, ",state_format=\"%u\"", n->state_format);
	fprintf(out, "} 1\n");
	gauge(out, "squashd_uptime_seconds", "Seconds since squashd started.", n->uptime_s);

	header(out, "squashd_mounts", "gauge", "Node-level mounts by mode and state.");
	for (size_t i = 0; i < n->n_mount_groups; i++) {
		const Squash__MountGroup *g = n->mount_groups[i];
		fprintf(out, "squashd_mounts{mode=");
		label_value(out, squash_mode_name(g->mode));
		fprintf(out, ",state=");
		label_value(out, g->state);
		fprintf(out, "} %u\n", g->count);
	}
	gauge(out, "squashd_jobs", "Jobs with a record on this node.", n->jobs);
	gauge(out, "squashd_jobs_failed", "Jobs whose images could not be mounted (kept until their epilog).",
	      n->jobs_failed);
	gauge(out, "squashd_steps", "Job steps holding images of their own (srun --squash-image in a job).",
	      n->steps);
	gauge(out, "squashd_sessions", "squash-shell sessions.", n->sessions);
	gauge(out, "squashd_fuse_servers", "FUSE server processes (squash-reader or squashfuse_ll) serving mounts.", n->fuse_servers);
	gauge(out, "squashd_loop_devices", "Loop devices held by kernel mounts.", n->loop_devices);
	gauge(out, "squashd_requests_in_progress", "Requests being served now.", n->requests_in_progress);
	per_kind(out, n, "squashd_requests_total", "Requests answered, by kind.", 0);
	per_kind(out, n, "squashd_request_failures_total", "Requests answered with anything but OK, by kind.", 1);
	histogram(out, n);
	header(out, "squashd_gc_releases_total", "counter",
	       "Jobs released by reconciliation with Slurm (their epilog did not release them).");
	fprintf(out, "squashd_gc_releases_total %llu\n", (unsigned long long)n->gc_releases);
	if (n->has_last_gc_age_s)
		gauge(out, "squashd_last_gc_age_seconds", "Seconds since the last completed gc pass.",
		      (unsigned long long)(n->last_gc_age_s > 0 ? n->last_gc_age_s : 0));
	header(out, "squashd_registry_save_errors_total", "counter", "Failed saves of the registry.");
	fprintf(out, "squashd_registry_save_errors_total %llu\n", (unsigned long long)n->registry_save_errors);
	gauge(out, "squashd_registry_saved", "1 when the registry is saved, 0 while saving fails.",
	      n->registry_error ? 0 : 1);
	gauge(out, "squashd_registry_unreadable",
	      "1 when squashd could not read its registry at start (it refuses new mounts), else 0.",
	      n->registry_unreadable ? 1 : 0);
	gauge(out, "squashd_registry_rebuilt",
	      "1 when squashd rebuilt its registry from the node at start (a damaged file kept aside), else 0.",
	      n->registry_rebuilt ? 1 : 0);
	gauge(out, "squashd_problems", "Problems squashctl health would report (without asking Slurm).",
	      n->n_problems);
	user_budgets(out, n, false);
	user_budgets(out, n, true);
}
