-- A mixed Lua workload (~0.2 s at the default n = 2): table sorting, string building, closures, numeric loops.
-- Deterministic output, so a candidate that changes behaviour is caught.
local n = tonumber(arg and arg[1]) or 2

local function lcg(seed)
  local s = seed
  return function() s = (s * 1103515245 + 12345) % 2147483648; return s end
end

local checksum = 0
for round = 1, n do
  local rand = lcg(round)
  local t = {}
  for i = 1, 60000 do t[i] = rand() % 100000 end
  table.sort(t)
  checksum = (checksum + t[1] + t[#t] + t[30000]) % 1000000007

  local parts = {}
  for i = 1, 20000 do parts[#parts + 1] = string.format("%x", (i * 7919) % 65536) end
  local s = table.concat(parts, ",")
  local count = 0
  for word in s:gmatch("[^,]+") do if #word == 4 then count = count + 1 end end
  checksum = (checksum + count + #s) % 1000000007

  local function fib(k) if k < 2 then return k end return fib(k - 1) + fib(k - 2) end
  checksum = (checksum + fib(22)) % 1000000007

  local acc = 0.0
  for i = 1, 300000 do acc = acc + math.sin(i) * math.sqrt(i) end
  checksum = (checksum + math.floor(acc)) % 1000000007
end
print(string.format("checksum %d", checksum))
