"""What a water mask says of rivers and lakes: centrelines and widths of channels, and water occurrence over dates."""
