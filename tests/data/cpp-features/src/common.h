#pragma once
int common_work(int n);
