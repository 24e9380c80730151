/* Parsing of the plugstack.conf arguments (see plugin_settings.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "plugin_settings.h"

#define PREFIX "spank_squash: "

static int bad_value(const char *key, const char *value, const char *want,
		     char *err, size_t errlen)
{
	snprintf(err, errlen, PREFIX "bad value '%s' for %s (want %s)", value,
		 key, want);
	return -1;
}

/* Stores a copy of value in *slot; a key given twice is a mistake. */
static int set_string(char **slot, const char *key, size_t klen,
		      const char *value, char *err, size_t errlen)
{
	if (*slot) {
		snprintf(err, errlen, PREFIX "setting '%.*s' is given twice in plugstack.conf",
			 (int)klen, key);
		return -1;
	}
	*slot = strdup(value);
	if (!*slot) {
		snprintf(err, errlen, PREFIX "out of memory");
		return -1;
	}
	return 0;
}

static int parse_seconds(const char *key, const char *value, long min, long max,
			 int *out, char *err, size_t errlen)
{
	char range[32];
	char *end;
	long v;

	errno = 0;
	v = strtol(value, &end, 10);
	if (errno || end == value || *end || v < min || v > max) {
		snprintf(range, sizeof range, "%ld-%ld", min, max);
		return bad_value(key, value, range, err, errlen);
	}
	*out = (int)v;
	return 0;
}

/* The raw text of each setting, before defaults and cross-checks. */
struct raw_settings {
	char *socket;
	char *default_target;
	char *allowed;
	char *munge;
	char *munge_socket;
	char *timeout;
	char *retry;
};

static void raw_free(struct raw_settings *r)
{
	free(r->socket);
	free(r->default_target);
	free(r->allowed);
	free(r->munge);
	free(r->munge_socket);
	free(r->timeout);
	free(r->retry);
}

static int collect(int ac, char **av, struct raw_settings *r, char *err,
		   size_t errlen)
{
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		const char *value = eq ? eq + 1 : NULL;
		size_t klen = eq ? (size_t)(eq - av[i]) : strlen(av[i]);
		char **slot = NULL;

		if (klen == 6 && !strncmp(av[i], "socket", klen))
			slot = &r->socket;
		else if (klen == 14 && !strncmp(av[i], "default_target", klen))
			slot = &r->default_target;
		else if (klen == 15 && !strncmp(av[i], "allowed_targets", klen))
			slot = &r->allowed;
		else if (klen == 5 && !strncmp(av[i], "munge", klen))
			slot = &r->munge;
		else if (klen == 12 && !strncmp(av[i], "munge_socket", klen))
			slot = &r->munge_socket;
		else if (klen == 7 && !strncmp(av[i], "timeout", klen))
			slot = &r->timeout;
		else if (klen == 5 && !strncmp(av[i], "retry", klen))
			slot = &r->retry;
		if (!slot) {
			snprintf(err, errlen, PREFIX "unknown setting '%.*s' in plugstack.conf",
				 (int)klen, av[i]);
			return -1;
		}
		if (!value || !*value) {
			snprintf(err, errlen, PREFIX "setting '%.*s' in plugstack.conf needs a value (%.*s=VALUE)",
				 (int)klen, av[i], (int)klen, av[i]);
			return -1;
		}
		if (set_string(slot, av[i], klen, value, err, errlen))
			return -1;
	}
	return 0;
}

static int check_socket(const char *key, const char *path, char *err,
			size_t errlen)
{
	struct sockaddr_un sun;

	if (path[0] != '/')
		return bad_value(key, path, "an absolute path", err, errlen);
	if (strlen(path) >= sizeof(sun.sun_path))
		return bad_value(key, path, "a path shorter than 108 bytes", err, errlen);
	return 0;
}

/* True when dir is one of the allowed prefixes or lies below one. */
static int within(const char *dir, const struct squash_prefixes *allowed)
{
	for (size_t i = 0; i < allowed->count; i++) {
		size_t n = strlen(allowed->items[i]);

		/* Default targets are made below it: an exact target is none. */
		if (!allowed->exact[i] && !strncmp(dir, allowed->items[i], n) &&
		    (dir[n] == '\0' || dir[n] == '/'))
			return 1;
	}
	return 0;
}

static int apply(struct raw_settings *r, struct squash_settings *s,
		 char *err, size_t errlen)
{
	struct squash_prefixes one = { 0 };
	const char *allowed_text;
	char why[256];

	s->socket_path = r->socket ? r->socket : strdup(SQUASH_DEFAULT_SOCKET);
	r->socket = NULL;
	s->default_target = r->default_target ? r->default_target
					      : strdup(SQUASH_DEFAULT_BASE);
	r->default_target = NULL;
	s->munge_socket = r->munge_socket;
	r->munge_socket = NULL;
	if (!s->socket_path || !s->default_target) {
		snprintf(err, errlen, PREFIX "out of memory");
		return -1;
	}
	if (check_socket("socket", s->socket_path, err, errlen))
		return -1;
	if (s->munge_socket && check_socket("munge_socket", s->munge_socket, err, errlen))
		return -1;

	/* The base of derived targets must itself be a valid prefix. */
	if (squash_prefixes_parse(s->default_target, &one, why, sizeof why)) {
		snprintf(err, errlen, PREFIX "bad value '%s' for default_target: %s",
			 s->default_target, why);
		return -1;
	}
	squash_prefixes_free(&one);

	allowed_text = r->allowed ? r->allowed : s->default_target;
	if (squash_allowed_targets_parse(allowed_text, &s->allowed, why, sizeof why)) {
		snprintf(err, errlen, PREFIX "bad value '%s' for allowed_targets: %s",
			 allowed_text, why);
		return -1;
	}
	if (!within(s->default_target, &s->allowed)) {
		snprintf(err, errlen, PREFIX "default_target %s is not within allowed_targets %s",
			 s->default_target, allowed_text);
		return -1;
	}

	/* auto: sign wherever a munged runs; squashd's require_munge decides
	 * whether unsigned requests may pass (clusters on auth/slurm). */
	s->use_munge = true;
	s->munge_if_present = true;
	if (r->munge) {
		if (!strcmp(r->munge, "no"))
			s->use_munge = false;
		else if (!strcmp(r->munge, "yes"))
			s->munge_if_present = false;
		else if (strcmp(r->munge, "auto"))
			return bad_value("munge", r->munge, "yes, no or auto", err, errlen);
	}

	s->timeout = SQUASH_DEFAULT_TIMEOUT;
	if (r->timeout && parse_seconds("timeout", r->timeout, 1, SQUASH_MAX_TIMEOUT,
					&s->timeout, err, errlen))
		return -1;
	s->retry = SQUASH_DEFAULT_RETRY;
	if (r->retry && parse_seconds("retry", r->retry, 0, SQUASH_MAX_RETRY, &s->retry,
				      err, errlen))
		return -1;
	return 0;
}

int squash_settings_parse(int ac, char **av, struct squash_settings *s,
			  char *err, size_t errlen)
{
	struct raw_settings raw = { 0 };
	int rc;

	memset(s, 0, sizeof *s);
	rc = collect(ac, av, &raw, err, errlen);
	if (rc == 0)
		rc = apply(&raw, s, err, errlen);
	raw_free(&raw);
	if (rc)
		squash_settings_free(s);
	return rc;
}

void squash_settings_free(struct squash_settings *s)
{
	free(s->socket_path);
	free(s->default_target);
	free(s->munge_socket);
	squash_prefixes_free(&s->allowed);
	memset(s, 0, sizeof *s);
}

struct squash_client_options
squash_settings_client(const struct squash_settings *s)
{
	struct squash_client_options o = {
		.socket_path = s->socket_path,
		.use_munge = s->use_munge,
		.munge_if_present = s->munge_if_present,
		.munge_socket = s->munge_socket,
		.timeout_ms = s->timeout * 1000,
		.retry_ms = s->retry * 1000,
	};
	return o;
}
