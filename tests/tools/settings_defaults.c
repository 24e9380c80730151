/* Prints squashd's settings with their defaults, one "KEY<TAB>VALUE" line
 * each, as `squashctl status` shows them (settings_describe): what
 * squashd runs with when squashd.conf is absent. For
 * test_settings_docs.py, which compares them with the documentation. */
#include "config.h"

#include <stdio.h>

#include "settings/settings.h"

int main(void)
{
	static struct setting_text texts[SETTINGS_SHOWN_MAX];
	struct squashd_config *cfg = settings_new();
	char err[512];

	if (!cfg || config_load("/nonexistent/squashd.conf", false, cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "settings_defaults: %s\n", cfg ? err : "out of memory");
		return 1;
	}
	size_t n = settings_describe(cfg, texts, SETTINGS_SHOWN_MAX);
	for (size_t i = 0; i < n; i++)
		printf("%s\t%s\n", texts[i].key, texts[i].value);
	settings_drop(cfg);
	return 0;
}
