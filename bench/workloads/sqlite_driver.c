/* A SQL script run through the SQLite library, for releases that ship the amalgamation
   without its shell (better-sqlite3's deps/sqlite3): what the shell's `.read` does for a
   script of plain SQL statements.  Prints a hash of every row the script's queries
   return, so that the output check compares all of it. */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"

static unsigned long long digest = 1469598103934665603ULL;   /* FNV-1a */

static int row(void *unused, int columns, char **values, char **names) {
    (void)unused;
    (void)names;
    for (int i = 0; i < columns; i++) {
        for (const char *c = values[i] ? values[i] : "NULL"; *c; c++)
            digest = (digest ^ (unsigned char)*c) * 1099511628211ULL;
        digest = (digest ^ '|') * 1099511628211ULL;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRIPT.sql\n", argv[0]);
        return 2;
    }
    FILE *file = fopen(argv[1], "rb");
    if (!file) {
        perror(argv[1]);
        return 1;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    rewind(file);
    char *sql = malloc(size + 1);
    if (!sql || fread(sql, 1, size, file) != (size_t)size) {
        fprintf(stderr, "%s: cannot read it\n", argv[1]);
        return 1;
    }
    sql[size] = 0;
    fclose(file);
    sqlite3 *db;
    char *error = NULL;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK
            || sqlite3_exec(db, sql, row, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "%s\n", error ? error : sqlite3_errmsg(db));
        return 1;
    }
    printf("%016llx\n", digest);
    sqlite3_close(db);
    free(sql);
    return 0;
}
