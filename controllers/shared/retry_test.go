package shared
