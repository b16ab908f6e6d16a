-- A mixed SQLite workload (~1 s at -O3 on the bench machine): bulk inserts through a
-- recursive CTE, an index build, aggregates, a join, string functions and sorting.
-- Everything printed is deterministic, so the output check compares it byte for byte.
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v REAL, s TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 250000)
INSERT INTO t SELECT x, (x * 7919) % 1009, (x % 977) * 0.5, printf('item-%08d-%x', x * 31 % 100003, x) FROM c;
CREATE INDEX t_k ON t(k);
CREATE TABLE u(k INTEGER PRIMARY KEY, name TEXT);
WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 1008)
INSERT INTO u SELECT x, 'group-' || (x * 13 % 97) FROM c;
SELECT count(*), sum(k), round(avg(v), 3) FROM t;
SELECT k, count(*), round(sum(v), 1) FROM t GROUP BY k ORDER BY 3 DESC, k LIMIT 5;
SELECT u.name, count(*), max(t.v) FROM t JOIN u USING(k) GROUP BY u.name ORDER BY 2 DESC, 1 LIMIT 5;
SELECT count(*) FROM t WHERE s LIKE '%-0009%';
SELECT substr(group_concat(s, ','), 1, 60) FROM (SELECT s FROM t ORDER BY s DESC LIMIT 2000);
SELECT count(DISTINCT upper(substr(s, 6, 4))) FROM t;
UPDATE t SET v = v * 1.5 WHERE k % 3 = 0;
DELETE FROM t WHERE id % 11 = 0;
SELECT count(*), round(sum(v), 2) FROM t;
SELECT k, v FROM t WHERE k BETWEEN 100 AND 110 ORDER BY v DESC, id LIMIT 3;
