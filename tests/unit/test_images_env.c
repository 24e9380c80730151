/* The images' environments applied to an environment (images_env.h), as
 * tasks and squash-shell's command get them: each target's default-env, or
 * the named ones of every image that has them, or none; a merged target
 * read once; refusals (an unknown name, LD_* from a default-env, SLURM_*)
 * say what and where, and the names' syntax is checked. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images_env.h"
#include "unit.h"

/* A fake environment: a few variables. */
#define VARS 8
struct fake_env {
	char *name[VARS], *value[VARS];
	unsigned sets;
};

static int fake_get(void *ctx, const char *var, char **value, char *why, size_t whylen)
{
	struct fake_env *e = ctx;

	(void)why;
	(void)whylen;
	*value = NULL;
	for (int i = 0; i < VARS; i++)
		if (e->name[i] && !strcmp(e->name[i], var))
			*value = strdup(e->value[i]);
	return 0;
}

static int fake_set(void *ctx, const char *var, const char *value, char *why, size_t whylen)
{
	struct fake_env *e = ctx;
	int free_slot = -1;

	e->sets++;
	for (int i = 0; i < VARS; i++) {
		if (e->name[i] && !strcmp(e->name[i], var)) {
			free(e->value[i]);
			e->value[i] = strdup(value);
			return 0;
		}
		if (!e->name[i] && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0) {
		snprintf(why, whylen, "full");
		return -1;
	}
	e->name[free_slot] = strdup(var);
	e->value[free_slot] = strdup(value);
	return 0;
}

static const char *fake_value(struct fake_env *e, const char *var)
{
	for (int i = 0; i < VARS; i++)
		if (e->name[i] && !strcmp(e->name[i], var))
			return e->value[i];
	return NULL;
}

static void fake_clear(struct fake_env *e)
{
	for (int i = 0; i < VARS; i++) {
		free(e->name[i]);
		free(e->value[i]);
	}
	memset(e, 0, sizeof *e);
}

/* Only PATH set. */
static void fake_reset(struct fake_env *e)
{
	fake_clear(e);
	fake_set(e, "PATH", "/usr/bin", NULL, 0);
	e->sets = 0;
}

static char top[] = "/tmp/test_images_env.XXXXXX";

/* TOP/name, with meta as its .squash/meta unless NULL. */
static char *make_target(const char *name, const char *meta)
{
	char *dir, path[512];
	FILE *f;

	if (asprintf(&dir, "%s/%s", top, name) < 0 || mkdir(dir, 0755))
		return NULL;
	if (!meta)
		return dir;
	snprintf(path, sizeof path, "%s/.squash", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/.squash/meta", dir);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	fputs(meta, f);
	fclose(f);
	return dir;
}

int main(void)
{
	struct fake_env e = {0};
	const struct squash_env_access access = {
		.option = "--env", .images = "given", .get = fake_get, .set = fake_set, .ctx = &e,
	};
	Squash__JobMount m[4], *mp[4];
	Squash__Response resp = SQUASH__RESPONSE__INIT;
	struct squash_env_names names;
	char err[2048], expect[2048];

	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	char *a = make_target("a", "format 1\ndefault-env run\nenv run prepend-path PATH bin\n"
				   "env run set MODE fast\nenv dev set MODE dev\n"
				   "env loader set LD_PRELOAD /x.so\nenv slurmy set SLURM_JOB_ID 1\n");
	char *b = make_target("b", NULL);
	char *c = make_target("c", "format 1\ndefault-env run\nenv run append-path PATH cbin\n"
				   "env dev set C_DEV yes\n");
	char *bad = make_target("bad", "format 1\ndefault-env run\nenv run set LD_PRELOAD /x.so\n");
	CHECK(a && b && c && bad);
	const char *targets[4] = {a, b, c, c}; /* the last two: one merged target */
	for (int i = 0; i < 4; i++) {
		squash__job_mount__init(&m[i]);
		m[i].image = "img";
		m[i].target = (char *)targets[i];
		mp[i] = &m[i];
	}
	resp.n_job_mounts = 4;
	resp.job_mounts = mp;

	/* No names: each target's default-env, in order, a merged target once. */
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, NULL, &access, err, sizeof err), 0);
	snprintf(expect, sizeof expect, "%s/bin:/usr/bin:%s/cbin", a, c);
	CHECK_STR(fake_value(&e, "PATH"), expect);
	CHECK_STR(fake_value(&e, "MODE"), "fast");
	/* And which ones it got: TARGET:ENV, a merged target once. */
	snprintf(expect, sizeof expect, "%s:run,%s:run", a, c);
	CHECK_STR(fake_value(&e, "SQUASH_ENVS"), expect);
	CHECK_INT(e.sets, 4);

	/* none: nothing. */
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, "none", &access, err, sizeof err), 0);
	CHECK_INT(e.sets, 0);

	/* Names: in every image that has them; LD_* when named. */
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, "dev,loader", &access, err, sizeof err), 0);
	CHECK_STR(fake_value(&e, "MODE"), "dev");
	CHECK_STR(fake_value(&e, "C_DEV"), "yes");
	CHECK_STR(fake_value(&e, "LD_PRELOAD"), "/x.so");
	CHECK_STR(fake_value(&e, "PATH"), "/usr/bin");
	snprintf(expect, sizeof expect, "%s:dev,%s:loader,%s:dev", a, a, c);
	CHECK_STR(fake_value(&e, "SQUASH_ENVS"), expect);

	/* IMAGE:ENV: in the image whose target ends in IMAGE only. */
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, "a:dev", &access, err, sizeof err), 0);
	CHECK_STR(fake_value(&e, "MODE"), "dev");
	CHECK(fake_value(&e, "C_DEV") == NULL);
	snprintf(expect, sizeof expect, "%s:dev", a);
	CHECK_STR(fake_value(&e, "SQUASH_ENVS"), expect);
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, "zz:dev", &access, err, sizeof err), -1);
	CHECK_CONTAINS(err, "--env=zz:dev: no image given at a target named zz defines the environment dev");
	CHECK_INT(squash_env_names_split("a/b:dev", "--env", &names, err, sizeof err), -1);
	CHECK_STR(err, "--env: 'a/b' is not an image's name (the last part of its target, as in "
		  "/squash/NAME) before ':ENV'");
	CHECK_INT(squash_env_names_split(":dev", "--env", &names, err, sizeof err), -1);
	/* A 65th name is refused before it is written anywhere, with an image
	 * part or without. */
	char many[64 * 2 + 2048];
	strcpy(many, "");
	for (int i = 0; i < 64; i++)
		strcat(many, "A,");
	memset(many + strlen(many), 'x', 2000);
	strcpy(many + 128 + 2000, ":B");
	CHECK_INT(squash_env_names_split(many, "--env", &names, err, sizeof err), -1);
	CHECK_STR(err, "--env: at most 64 names of at most 64 characters");
	CHECK_INT(names.count, 64);

	/* A name no image has: refused, listing what the images have. */
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, "dev,nosuch", &access, err, sizeof err), -1);
	snprintf(expect, sizeof expect, "--env=dev,nosuch: no image given defines the environment "
		 "nosuch (the images' environments: %s (run, dev, loader, slurmy), %s (run, dev))",
		 a, c);
	CHECK_STR(err, expect);

	/* Never SLURM_*; LD_* never from a default-env. */
	CHECK_INT(squash_images_env_apply(&resp, "slurmy", &access, err, sizeof err), -1);
	CHECK_CONTAINS(err, "/.squash/meta: line 7: environment slurmy sets SLURM_JOB_ID: Slurm's");
	m[1].target = bad;
	CHECK_INT(squash_images_env_apply(&resp, NULL, &access, err, sizeof err), -1);
	CHECK_CONTAINS(err, "bad/.squash/meta: line 3: environment run sets LD_PRELOAD: loader");

	/* A software image (environments) away from the target it was packed
	 * for gets a note; one at its target, or a data image (none), none. */
	char *moved = make_target("moved", "format 1\ntarget /squash/tool\ndefault-env default\n"
				       "env default prepend-path PATH bin\n");
	char *data = make_target("data", "format 1\ntarget /squash/data\n");
	CHECK(moved && data);
	char *noted = NULL;
	size_t noted_len = 0;
	FILE *notes = open_memstream(&noted, &noted_len);
	struct squash_env_access noting = access;
	noting.notes = notes;
	m[0].target = moved;
	m[1].target = data;
	m[2].target = m[3].target = c;
	fake_reset(&e);
	CHECK_INT(squash_images_env_apply(&resp, NULL, &noting, err, sizeof err), 0);
	fclose(notes);
	snprintf(expect, sizeof expect, "squash: note: the image at %s was packed for /squash/tool: "
		 "paths squash-pack rewrote in it lead there, not here; mount it at /squash/tool "
		 "(IMAGE:/squash/tool), or pack it again with --target %s\n", moved, moved);
	CHECK_STR(noted, expect);
	free(noted);

	/* The names' syntax. */
	CHECK_INT(squash_env_names_split("a,b_2", "--env", &names, err, sizeof err), 0);
	CHECK_INT(names.count, 2);
	CHECK_STR(names.name[1], "b_2");
	CHECK_INT(squash_env_names_split("a,none", "--env", &names, err, sizeof err), -1);
	CHECK_STR(err, "--env: 'none' stands alone (it means no environment)");
	CHECK_INT(squash_env_names_split("a,,b", "--env", &names, err, sizeof err), -1);
	CHECK_CONTAINS(err, "--env: '' is not an environment name");

	fake_clear(&e);
	for (const char *n = "a/.squash/meta\0a/.squash\0a\0b\0c/.squash/meta\0c/.squash\0c\0"
			     "bad/.squash/meta\0bad/.squash\0bad\0moved/.squash/meta\0moved/.squash\0"
			     "moved\0data/.squash/meta\0data/.squash\0data\0";
	     *n; n += strlen(n) + 1) {
		char path[512];

		snprintf(path, sizeof path, "%s/%s", top, n);
		if (remove(path))
			perror(path);
	}
	rmdir(top);
	free(a);
	free(b);
	free(c);
	free(bad);
	free(moved);
	free(data);
	return unit_exit_code();
}
