#pragma once
#include <cstdio>
#include <map>
#include <string>
#include <vector>
